package upstream

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// FuzzProgressOf: a notification's progress is what encoding/json reads
// of its params, for params that are a JSON object: the last "progress"
// member (names compared exactly, as MCP's are), when it is a number.
func FuzzProgressOf(f *testing.F) {
	for _, s := range []string{`{"progress":1}`, `{"progress":-2.5e3,"total":4}`, `{"progress":1,"progress":"x"}`,
		`{"progress":"3"}`, `{"progress":null}`, `{"progr\u0065ss":7}`, `{"progress":1e400}`, `{"a":{"progress":3}}`,
		`{"progress":01}`, `{"progress":-0}`, `{"progress":1,"x":[}`, `[1]`, `{"progress":9007199254740993}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		got, ok := progressOf(params)
		var m map[string]json.RawMessage
		if json.Unmarshal(params, &m) != nil {
			assert.False(t, ok, "%s is no JSON object, yet its progress was read: %v", params, got)
			return
		}
		raw, has := m["progress"]
		var want float64
		wantOK := has && json.Unmarshal(raw, &want) == nil && strings.TrimSpace(string(raw)) != "null"
		assert.Equal(t, wantOK, ok, "%s", params)
		if ok && wantOK {
			assert.Equal(t, want, got, "%s", params)
		}
	})
}

// FuzzProgressKeyOf: a token names a registration exactly when it is the
// JSON string "agg-" and a positive number as strconv writes it, the
// number being the key; anything else (a number, a string with the same
// digits, a leading zero, a sign) names none.
func FuzzProgressKeyOf(f *testing.F) {
	for _, s := range []string{`"agg-1"`, `1`, `"1"`, `"agg-01"`, `"agg--1"`, `"agg-+1"`, `"agg-\u0031"`,
		`"agg-999999999999999999"`, `"agg-9223372036854775807"`, `"agg-1"x`, `"agg-1\"`, `-1`, `"agg-1.0"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		key, ok := progressKeyOf(raw)
		var s string
		wantOK := false
		var want int64
		if json.Unmarshal(raw, &s) == nil && len(raw) > 0 && raw[0] == '"' {
			if digits, found := strings.CutPrefix(s, "agg-"); found && len(digits) <= 18 {
				if n, err := strconv.ParseInt(digits, 10, 64); err == nil && n > 0 && strconv.FormatInt(n, 10) == digits {
					wantOK, want = true, n
				}
			}
		}
		assert.Equal(t, wantOK, ok, "%s", raw)
		if ok {
			assert.Equal(t, want, key, "%s", raw)
			assert.Equal(t, `"agg-`+strconv.FormatInt(key, 10)+`"`, string(appendProgressToken(nil, key)))
		}
	})
}

// Calls at once whose downstream tokens are equal, or spell the same
// digits as a string and as a number, or are past int64 or negative, each
// see exactly their own three notifications, under their own token as
// they gave it.
func TestProgressOfCallsWithEqualTokens(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "fidelity", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tokens := []string{`7`, `7`, `"7"`, `"agg-1"`, `-3`, `123456789012345678901234567890`, `"x"`, `"x"`}
	logs := make([]*progressLog, len(tokens))
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	for i, token := range tokens {
		logs[i] = newProgressLog()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = inst.CallTool(ctx, Call{Name: "progress_then_result", Arguments: json.RawMessage(`{}`),
				ProgressToken: json.RawMessage(token), OnProgress: logs[i].add})
		}()
	}
	wg.Wait()
	for i, token := range tokens {
		require.NoError(t, errs[i])
		got := logs[i].all()
		require.Len(t, got, 3, "call %d, token %s", i, token)
		for step, params := range got {
			assert.Equal(t, token, string(rawjson.Member(params, "progressToken")), "call %d", i)
			assert.Equal(t, strconv.Itoa(step+1), string(rawjson.Member(params, "progress")), "call %d", i)
		}
	}
	inst.progMu.Lock()
	defer inst.progMu.Unlock()
	assert.Empty(t, inst.progress, "every registration ended with its call")
}
