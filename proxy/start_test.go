package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// completion takes what Start answers: a copy, since the answer is lent.
type completion chan *jsonrpc.Message

func (c completion) Complete(m *jsonrpc.Message) {
	if m != nil {
		kept := *m
		kept.Result = bytes.Clone(m.Result)
		m = &kept
	}
	c <- m
}

// await is the one response c gets; it fails the test if none comes.
func (c completion) await(t *testing.T) *jsonrpc.Message {
	t.Helper()
	select {
	case m := <-c:
		return m
	case <-time.After(waitTimeout):
		t.Fatal("Start never answered")
		return nil
	}
}

// callRequest is a tools/call of session s with params, its context and
// its progress notifications (Send).
func callRequest(s downstream.Session, params string) (context.Context, *downstream.Request, chan *jsonrpc.Message) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sent := make(chan *jsonrpc.Message, 64)
	return ctx, &downstream.Request{
		Msg:      &jsonrpc.Message{ID: json.RawMessage(`7`), Method: "tools/call", Params: json.RawMessage(params)},
		Session:  s,
		Protocol: "2025-11-25",
		Send:     func(m *jsonrpc.Message) bool { sent <- m; return true },
		Cancel:   cancel,
	}, sent
}

// answerJSON is resp's result or error, as JSON.
func answerJSON(t *testing.T, resp *jsonrpc.Message) string {
	t.Helper()
	require.NotNil(t, resp)
	if resp.Error != nil {
		b, err := json.Marshal(resp.Error)
		require.NoError(t, err)
		return `{"error":` + string(b) + `}`
	}
	return string(resp.Result)
}

// Start answers every call as Handle does, whichever way it goes: at once
// (a shared server), on a goroutine of its own (a lease), with an error
// of the upstream's or of the aggregator's.
func TestStartAnswersAsHandleDoes(t *testing.T) {
	p := newTestProxy(t)
	reconcile(t, p, load(t, t.TempDir(), baseServers()))
	s := fakeSession("start")
	p.SessionOpened(s)
	defer p.SessionClosed(s)
	for _, params := range []string{
		`{"name":"demo_echo","arguments":{"text":"hello"}}`,
		`{"name":"demo_add","arguments":{"a":2,"b":3}}`,
		`{"name":"demo_fail","arguments":{"message":"no"}}`,
		`{"name":"demo_add","arguments":{"a":"two"}}`,
		`{"name":"ctr_get","arguments":{}}`,
		`{"name":"demo_echo","arguments":{"text":"hello"},"_meta":{"progressToken":"p"}}`,
	} {
		t.Run(params, func(t *testing.T) {
			ctx, req, _ := callRequest(s, params)
			p.Handle(ctx, req) // a lease's first call is told of the lease; the next ones are not
			ctx, req, _ = callRequest(s, params)
			want := p.Handle(ctx, req)
			ctx, req, _ = callRequest(s, params)
			done := make(completion, 2)
			require.True(t, p.Start(ctx, req, done))
			assert.JSONEq(t, answerJSON(t, want), answerJSON(t, done.await(t)))
			assert.Empty(t, done, "answered once")
		})
	}
	// What Start leaves to Handle: a tool no server exports, another method.
	ctx, req, _ := callRequest(s, `{"name":"no_such_tool","arguments":{}}`)
	assert.False(t, p.Start(ctx, req, make(completion, 1)))
	req.Msg.Method = "tools/list"
	assert.False(t, p.Start(ctx, req, make(completion, 1)))
}

// A call Start serves relays its progress with the client's token, and
// ends, with no response due, when its client cancels it; one whose
// deadline cancels it is answered with the timeout.
func TestStartProgressCancelAndTimeout(t *testing.T) {
	p := newTestProxy(t)
	reconcile(t, p, load(t, t.TempDir(), baseServers()))
	s := fakeSession("start")
	p.SessionOpened(s)
	defer p.SessionClosed(s)

	ctx, req, sent := callRequest(s, `{"name":"demo_slow","arguments":{"seconds":0.2,"steps":2},"_meta":{"progressToken":"tok"}}`)
	done := make(completion, 1)
	require.True(t, p.Start(ctx, req, done))
	resp := done.await(t)
	require.Nil(t, resp.Error, "%+v", resp.Error)
	require.NotEmpty(t, sent, "progress relayed")
	for len(sent) > 0 {
		n := <-sent
		assert.Equal(t, "notifications/progress", n.Method)
		var params struct {
			Token json.RawMessage `json:"progressToken"`
		}
		require.NoError(t, json.Unmarshal(n.Params, &params))
		assert.JSONEq(t, `"tok"`, string(params.Token), "the client's own token")
	}

	ctx, req, _ = callRequest(s, `{"name":"demo_slow","arguments":{"seconds":30,"steps":1}}`)
	done = make(completion, 1)
	require.True(t, p.Start(ctx, req, done))
	req.Cancel(context.Canceled)
	assert.Nil(t, done.await(t), "a call its client cancelled gets no response")

	ctx, req, _ = callRequest(s, `{"name":"demo_slow","arguments":{"seconds":30,"steps":1}}`)
	done = make(completion, 1)
	require.True(t, p.Start(ctx, req, done))
	req.Cancel(ErrTimeout) // as the call's deadline does
	resp = done.await(t)
	require.NotNil(t, resp.Error)
	assert.Contains(t, resp.Error.Message, "no result within")
}

// A policy that may ask the user leaves every call to Handle: Start
// declines it having done nothing, and Handle applies the policy.
func TestStartLeavesPolicedCallsToHandle(t *testing.T) {
	p := newTestProxy(t)
	yaml := strings.Replace(string(baseServers().yaml()), "version: 1\n",
		"version: 1\npolicy:\n  - name: no-fail\n    when: 'tool == \"demo_fail\"'\n    action: deny\n", 1)
	ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), []byte(yaml), nil)
	require.NotNil(t, ws, "problems: %v", problems)
	reconcile(t, p, ws)
	s := fakeSession("start")
	p.SessionOpened(s)
	defer p.SessionClosed(s)

	ctx, req, _ := callRequest(s, `{"name":"demo_fail","arguments":{"message":"no"}}`)
	done := make(completion, 1)
	require.False(t, p.Start(ctx, req, done))
	assert.Empty(t, done)
	resp := p.Handle(ctx, req)
	require.NotNil(t, resp)
	assert.Contains(t, string(resp.Result), `denied by policy rule \"no-fail\"`)
}
