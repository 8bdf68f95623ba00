package bridge

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/requeststate"
)

func TestInputResponses(t *testing.T) {
	got, bad := inputResponses(json.RawMessage(`{"name":"t","inputResponses":{"input-1":{"action":"accept","content":{"n":1}},"input\u002d2":{}}}`))
	require.Empty(t, bad)
	assert.Equal(t, map[string]json.RawMessage{"input-1": json.RawMessage(`{"action":"accept","content":{"n":1}}`), "input-2": json.RawMessage(`{}`)}, got)

	got, bad = inputResponses(json.RawMessage(`{"name":"t"}`))
	assert.Empty(t, bad)
	assert.Nil(t, got)

	_, bad = inputResponses(json.RawMessage(`{"inputResponses":{"input-1":"yes"}}`))
	assert.Contains(t, bad, `inputResponses["input-1"] must be an object`)
	_, bad = inputResponses(json.RawMessage(`{"inputResponses":[1]}`))
	assert.Contains(t, bad, "must be an object keyed by the inputRequests")
}

func TestInputRequiredRendering(t *testing.T) {
	body := inputRequired([]*inputAsk{
		{key: "input-1", method: "elicitation/create", params: json.RawMessage(`{"message":"m","requestedSchema":{"type":"object","properties":{}}}`)},
		{key: "input-2", method: "roots/list"},
	}, "mcpagg1.x")
	assert.JSONEq(t, `{"resultType":"input_required","inputRequests":{
		"input-1":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}},
		"input-2":{"method":"roots/list"}},"requestState":"mcpagg1.x"}`, string(body))
}

func TestBridgeBounds(t *testing.T) {
	var b Bridge
	require.NoError(t, b.Init(Config{}))
	held := func(caller string) *exchange {
		return &exchange{id: requeststate.NewNonce(), caller: caller, cancel: func() {}}
	}
	var first *exchange
	for i := 0; i < maxHeldPerCaller; i++ {
		x := held("meta:a")
		require.NoError(t, b.register(x))
		if first == nil {
			first = x
		}
	}
	err := b.register(held("meta:a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("already has %d requests awaiting its input", maxHeldPerCaller))
	require.NoError(t, b.register(held("meta:b")), "another caller has its own bound")
	b.remove(first)
	require.NoError(t, b.register(held("meta:a")), "a removed exchange frees its place")
	b.remove(first) // twice: no effect
	assert.Equal(t, maxHeldPerCaller, b.perCaller["meta:a"])
}

// FuzzInputResponses: a client's inputResponses, whatever they are, never
// panic the reader, and only objects are taken as answers.
func FuzzInputResponses(f *testing.F) {
	f.Add([]byte(`{"inputResponses":{"input-1":{"action":"accept"}}}`))
	f.Add([]byte(`{"inputResponses":{"a":1}}`))
	f.Add([]byte(`{"inputResponses":null,"requestState":"mcpagg1.x"}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		got, bad := inputResponses(params)
		if bad != "" {
			return
		}
		for k, v := range got {
			if len(v) == 0 || v[0] != '{' {
				t.Fatalf("answer %q is not an object: %s", k, v)
			}
		}
	})
}
