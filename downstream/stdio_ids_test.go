package downstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// Requests in flight with ids of every kind the table keeps (negative,
// past int64, zero, strings, the empty string) are told apart: each is
// answered under its id exactly as sent, a duplicate of any of them is
// refused while it runs, and a cancellation ends only the request it names.
func TestStdioIDsOfEveryKind(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	ids := []string{`-5`, `0`, `12345678901234567890123`, `-12345678901234567890123`, `9223372036854775807`,
		`-9223372036854775808`, `"x"`, `""`, `"s:x"`, `"12345678901234567890124"`}
	for _, id := range ids {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"slow"}`)
	}
	// Each one's duplicate, refused under the id as sent, while the first
	// runs on.
	for _, id := range ids {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
		m := p.next(t)
		assert.Equal(t, id, string(m["id"]))
		var e jsonrpc.Error
		require.NoError(t, json.Unmarshal(m["error"], &e), "%v", m)
		assert.Contains(t, e.Message, "already in use", id)
	}
	// Ids that are no integer nor string are refused, not kept.
	for _, id := range []string{`1.5`, `1e2`, `true`, `{}`} {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
		m := p.next(t)
		var e jsonrpc.Error
		require.NoError(t, json.Unmarshal(m["error"], &e), "%v", m)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, e.Code, id)
	}
	// Cancelling the big integer leaves the big string, and the others.
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345678901234567890123}}`)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s:x"}}`)
	p.send(t, `{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	assert.Equal(t, `"after"`, string(p.next(t)["id"]))
	close(h.release)
	answered := map[string]bool{}
	for range len(ids) - 2 {
		m := p.next(t)
		assert.Contains(t, string(m["result"]), `"slow"`, "%v", m)
		answered[string(m["id"])] = true
	}
	for _, id := range ids {
		cancelled := id == `12345678901234567890123` || id == `"s:x"`
		assert.Equal(t, !cancelled, answered[id], "id %s answered", id)
	}
	// Every id is free again.
	for _, id := range ids {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
		m := p.next(t)
		assert.Equal(t, id, string(m["id"]))
		assert.Contains(t, string(m["result"]), `"ping"`, "%v", m)
	}
}

// The in-flight limit frees exactly one slot per response written, however
// many responses one write carries: after two requests at the limit are
// answered, two more run at once, and a third is refused as busy again.
func TestStdioInFlightLimitFreesOneSlotPerResponse(t *testing.T) {
	h := &holdHandler{stdioHandler: *newStdioHandler(), release: make(chan struct{})}
	p := startStdio(t, h, StdioOptions{MaxInFlight: 2})
	for round, ids := range [][3]string{{"1", "2", "3"}, {"4", "5", "6"}, {"7", "8", "9"}} {
		p.send(t, `{"jsonrpc":"2.0","id":`+ids[0]+`,"method":"hold","params":{}}`)
		p.send(t, `{"jsonrpc":"2.0","id":`+ids[1]+`,"method":"hold","params":{}}`)
		p.send(t, `{"jsonrpc":"2.0","id":`+ids[2]+`,"method":"ping"}`)
		m := p.next(t)
		assert.Equal(t, ids[2], string(m["id"]), "round %d", round)
		var e jsonrpc.Error
		require.NoError(t, json.Unmarshal(m["error"], &e), "round %d: %v", round, m)
		assert.Equal(t, codeBusy, e.Code, "round %d", round)
		h.release <- struct{}{}
		h.release <- struct{}{}
		got := map[string]bool{}
		for range 2 {
			m := p.next(t)
			assert.Contains(t, m, "result", "round %d: %v", round, m)
			got[string(m["id"])] = true
		}
		assert.Equal(t, map[string]bool{ids[0]: true, ids[1]: true}, got, "round %d", round)
	}
}
