package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAsInputRequired(t *testing.T) {
	for name, tc := range map[string]struct {
		result   string
		required bool
		err      string
		keys     []string
		state    string
	}{
		"complete":             {result: `{"content":[],"resultType":"complete"}`},
		"no resultType":        {result: `{"content":[]}`},
		"one elicitation":      {result: `{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"m"}}}}`, required: true, keys: []string{"a"}},
		"roots without params": {result: `{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}},"requestState":"s1"}`, required: true, keys: []string{"r"}, state: "s1"},
		"state only":           {result: `{"resultType":"input_required","requestState":"shed"}`, required: true, state: "shed"},
		"neither":              {result: `{"resultType":"input_required"}`, required: true, err: "neither inputRequests nor requestState"},
		"other method":         {result: `{"resultType":"input_required","inputRequests":{"x":{"method":"tools/call"}}}`, required: true, err: `"tools/call" is not a request`},
		"malformed":            {result: `{"resultType":"input_required","inputRequests":[1]}`, required: true, err: "malformed"},
	} {
		t.Run(name, func(t *testing.T) {
			in, required, err := asInputRequired(json.RawMessage(tc.result))
			assert.Equal(t, tc.required, required)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			var keys []string
			for k := range in.requests {
				keys = append(keys, k)
			}
			assert.ElementsMatch(t, tc.keys, keys)
			if tc.state != "" {
				require.NotNil(t, in.state)
				assert.Equal(t, tc.state, *in.state)
			}
		})
	}
	var many []byte = []byte(`{"resultType":"input_required","inputRequests":{`)
	for i := 0; i <= maxInputRequests; i++ {
		if i > 0 {
			many = append(many, ',')
		}
		many = append(many, []byte(`"k`+string(rune('a'+i))+`":{"method":"roots/list"}`)...)
	}
	many = append(many, "}}"...)
	_, _, err := asInputRequired(many)
	assert.ErrorContains(t, err, "at most")
}

func TestRetryParams(t *testing.T) {
	state := "s\"1"
	out, err := retryParams(json.RawMessage(`{"name":"t","arguments":{"n": 1.50},"_meta":{"progressToken":"agg-1"}}`),
		json.RawMessage(`{"a":{"action":"accept"}}`), &state)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"t","arguments":{"n":1.50},"_meta":{"progressToken":"agg-1"},"inputResponses":{"a":{"action":"accept"}},"requestState":"s\"1"}`, string(out))
	assert.Contains(t, string(out), `"n": 1.50`, "the caller's bytes stay")

	// A second round replaces the first round's members.
	again, err := retryParams(out, json.RawMessage(`{"b":{}}`), nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"t","arguments":{"n":1.50},"_meta":{"progressToken":"agg-1"},"inputResponses":{"b":{}},"requestState":"s\"1"}`, string(again))

	_, err = retryParams(json.RawMessage(`[1]`), json.RawMessage(`{}`), nil)
	assert.Error(t, err)
}

func TestEnvelopeWrap(t *testing.T) {
	env := newEnvelope("2026-07-28", "mcp-aggregator", "1.2.3", clientCapabilities)
	for name, tc := range map[string]struct{ in, want string }{
		"none": {"", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp-aggregator","version":"1.2.3"},"io.modelcontextprotocol/clientCapabilities":` + string(clientCapabilities) + `}}`},
		"keeps the caller's _meta": {`{"name":"x","_meta":{"progressToken":"agg-7","io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`,
			`{"name":"x","_meta":{"progressToken":"agg-7","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp-aggregator","version":"1.2.3"},"io.modelcontextprotocol/clientCapabilities":` + string(clientCapabilities) + `}}`},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := env.wrap(json.RawMessage(tc.in))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(out))
		})
	}
	_, err := env.wrap(json.RawMessage(`"text"`))
	assert.Error(t, err)
}

// FuzzAsInputRequired: an upstream's result, whatever it is, never panics the
// reader, and what it accepts is bounded.
func FuzzAsInputRequired(f *testing.F) {
	f.Add([]byte(`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}},"requestState":"x"}`))
	f.Add([]byte(`{"resultType":"complete"}`))
	f.Add([]byte(`{"resultType":"input_required","inputRequests":null,"requestState":null}`))
	f.Fuzz(func(t *testing.T, result []byte) {
		in, _, err := asInputRequired(result)
		if err == nil && len(in.requests) > maxInputRequests {
			t.Fatalf("accepted %d input requests", len(in.requests))
		}
	})
}
