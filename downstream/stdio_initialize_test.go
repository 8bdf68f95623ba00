package downstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// initHandler answers initialize with the version the client asked for,
// refusing "bad", and every other request with its protocol.
type initHandler struct{ *stdioHandler }

func (h initHandler) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	if req.Msg.Method != "initialize" {
		return h.stdioHandler.Handle(ctx, req)
	}
	var p struct {
		Version string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Msg.Params, &p)
	if p.Version == "bad" {
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "bad version"))
	}
	res, _ := jsonrpc.Result(nil, map[string]string{"protocolVersion": p.Version})
	return res
}

func TestStdioInitializesOnce(t *testing.T) {
	h := initHandler{newStdioHandler()}
	p := startStdio(t, h, StdioOptions{})
	init := func(id int, version string) map[string]json.RawMessage {
		p.send(t, `{"jsonrpc":"2.0","id":`+itoa(id)+`,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{}}}`)
		return p.next(t)
	}
	// A failed initialize may be tried again.
	m := init(1, "bad")
	require.Contains(t, m, "error")
	m = init(2, "2025-11-25")
	require.Contains(t, m, "result", "%s", m["error"])
	recv(t, h.opened)

	m = init(3, "2025-03-26")
	assert.JSONEq(t, `3`, string(m["id"]))
	var e jsonrpc.Error
	require.NoError(t, json.Unmarshal(m["error"], &e), "a second initialize was served: %s", m["result"])
	assert.Equal(t, jsonrpc.CodeInvalidRequest, e.Code)
	assert.Contains(t, e.Message, "send it once per connection")

	// The session keeps the version it negotiated.
	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	m = p.next(t)
	assert.JSONEq(t, `{"method":"tools/list","protocol":"2025-11-25","sessionless":"false","principal":"local"}`, string(m["result"]))
}

// panicHandler panics on "boom", in requests and notifications.
type panicHandler struct{ *stdioHandler }

func (h panicHandler) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	if req.Msg.Method == "boom" {
		panic("boom")
	}
	return h.stdioHandler.Handle(ctx, req)
}

func (h panicHandler) Notified(ctx context.Context, s Session, m *jsonrpc.Message) {
	if m.Method == "notifications/boom" {
		panic("boom")
	}
	h.stdioHandler.Notified(ctx, s, m)
}

func TestStdioHandlerPanicIsAnInternalError(t *testing.T) {
	h := panicHandler{newStdioHandler()}
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"boom"}`)
	m := p.next(t)
	assert.JSONEq(t, `1`, string(m["id"]))
	var e jsonrpc.Error
	require.NoError(t, json.Unmarshal(m["error"], &e))
	assert.Equal(t, jsonrpc.CodeInternalError, e.Code)
	assert.Contains(t, e.Message, "internal error while serving boom")

	p.send(t, `{"jsonrpc":"2.0","method":"notifications/boom"}`)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/after"}`)
	assert.Equal(t, "notifications/after", recv(t, h.notified).Method)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	m = p.next(t)
	assert.JSONEq(t, `2`, string(m["id"]))
	assert.Contains(t, m, "result")
}

// askHandler asks the client on "ask" and answers with what it answered.
type askHandler struct{ *stdioHandler }

func (h askHandler) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	switch req.Msg.Method {
	case "ask":
		resp, err := req.Ask(ctx, "sampling/createMessage", json.RawMessage(`{}`))
		if err != nil {
			return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", err))
		}
		return &jsonrpc.Message{Result: resp.Result}
	case "initialize":
		return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
	}
	return h.stdioHandler.Handle(ctx, req)
}

// With every slot taken by requests that wait for the client's answers, a
// further request is refused rather than left to block the reading of
// those answers.
func TestStdioFullHouseStillReadsTheClientsAnswers(t *testing.T) {
	p := startStdio(t, askHandler{newStdioHandler()}, StdioOptions{MaxInFlight: 2})
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	p.next(t)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"ask"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"ask"}`)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`) // no slot
	asked := map[string]bool{}
	for len(asked) < 2 {
		m := p.next(t)
		require.Contains(t, m, "method", "%v", m)
		asked[string(m["id"])] = true
	}
	refused := p.next(t)
	assert.JSONEq(t, `3`, string(refused["id"]))
	var e jsonrpc.Error
	require.NoError(t, json.Unmarshal(refused["error"], &e))
	assert.Equal(t, codeBusy, e.Code)
	assert.Contains(t, e.Message, "at most 2 at once")

	for id := range asked {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"answer":`+id+`}}`)
	}
	answered := map[string]string{}
	for len(answered) < 2 {
		m := p.next(t)
		answered[string(m["id"])] = string(m["result"])
	}
	assert.Len(t, answered, 2)
	for _, id := range []string{"1", "2"} {
		assert.Contains(t, answered[id], `"answer"`, "request %s", id)
	}
	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	assert.JSONEq(t, `4`, string(p.next(t)["id"]))
}
