package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

const clientCaps = `{"sampling":{},"elicitation":{"form":{}},"roots":{"listChanged":true}}`

// nextMsg reads the next message the server wrote.
func (p *stdioPeer) nextMsg(t *testing.T) *jsonrpc.Message {
	t.Helper()
	require.True(t, p.out.Scan(), "no more output: %v", p.out.Err())
	m, err := jsonrpc.Decode(p.out.Bytes())
	require.NoError(t, err, "%s", p.out.Bytes())
	return m
}

// initStdio initializes a session declaring clientCaps and returns it.
func initStdio(t *testing.T, p *stdioPeer, h *httpFake) Session {
	t.Helper()
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+clientCaps+`}}`)
	assert.JSONEq(t, `0`, string(p.nextMsg(t).ID))
	return recv(t, h.opened)
}

// asking answers "ask" requests with what req.Ask got back: the client's
// whole response message as the result, or {"error": ...} when Ask failed.
func asking(ctx func(context.Context) (context.Context, context.CancelFunc)) func(context.Context, *Request) *jsonrpc.Message {
	return func(c context.Context, req *Request) *jsonrpc.Message {
		switch req.Msg.Method {
		case "initialize":
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{}}`)}
		case "ask":
		default:
			return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
		}
		if req.Ask == nil {
			return &jsonrpc.Message{Result: json.RawMessage(`{"error":"no Ask"}`)}
		}
		if ctx != nil {
			var cancel context.CancelFunc
			c, cancel = ctx(c)
			defer cancel()
		}
		resp, err := req.Ask(c, "sampling/createMessage", json.RawMessage(`{"messages":[],"maxTokens":5}`))
		if errors.Is(err, context.Canceled) {
			return nil // the client cancelled the request: no response is due
		}
		if err != nil {
			r, _ := jsonrpc.Result(nil, map[string]string{"error": err.Error()})
			return r
		}
		return &jsonrpc.Message{Result: resp.Encode()}
	}
}

func TestStdioAskRoundTrip(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	p := startStdio(t, h, StdioOptions{})
	initStdio(t, p, h)

	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"ask"}`)
	ask := p.nextMsg(t)
	assert.Equal(t, "sampling/createMessage", ask.Method)
	assert.JSONEq(t, `"s-1"`, string(ask.ID))
	assert.JSONEq(t, `{"messages":[],"maxTokens":5}`, string(ask.Params))
	p.send(t, `{"jsonrpc":"2.0","id":"s-1","result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`)
	resp := p.nextMsg(t)
	assert.JSONEq(t, `5`, string(resp.ID))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"s-1","result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`, string(resp.Result))

	// An error answer comes back as the client sent it, under a new id.
	p.send(t, `{"jsonrpc":"2.0","id":6,"method":"ask"}`)
	ask = p.nextMsg(t)
	assert.JSONEq(t, `"s-2"`, string(ask.ID))
	p.send(t, `{"jsonrpc":"2.0","id":"s-2","error":{"code":-1,"message":"User rejected sampling request","data":{"x":1}}}`)
	resp = p.nextMsg(t)
	assert.JSONEq(t, `6`, string(resp.ID))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"s-2","error":{"code":-1,"message":"User rejected sampling request","data":{"x":1}}}`, string(resp.Result))
	assert.Empty(t, h.notified, "client responses never reach Notified")
}

func TestStdioSessionRequestRoundTrip(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	p := startStdio(t, h, StdioOptions{})
	sess := initStdio(t, p, h)

	type result struct {
		msg *jsonrpc.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := sess.Request(context.Background(), "roots/list", nil)
		done <- result{m, err}
	}()
	req := p.nextMsg(t)
	assert.Equal(t, "roots/list", req.Method)
	assert.Nil(t, req.Params)
	p.send(t, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"roots":[{"uri":"file:///w"}]}}`)
	got := recv(t, done)
	require.NoError(t, got.err)
	assert.JSONEq(t, `{"roots":[{"uri":"file:///w"}]}`, string(got.msg.Result))
	assert.JSONEq(t, string(req.ID), string(got.msg.ID))
	assert.Empty(t, h.notified)
}

func TestStdioCapabilitiesAndNoRequestsWithoutASession(t *testing.T) {
	h, seen := seeingFake()
	p := startStdio(t, h, StdioOptions{})

	// Before initialize: no Ask, and Session.Request fails at once.
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	req := recv(t, seen)
	p.nextMsg(t)
	assert.Nil(t, req.Ask)
	assert.Nil(t, req.ClientCapabilities)
	assert.Nil(t, req.Session.ClientCapabilities())
	_, err := req.Session.Request(context.Background(), "roots/list", nil)
	assert.ErrorIs(t, err, ErrNoStream)

	// Sessionless (2026-07-28): capabilities from _meta, no Ask.
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`)
	req = recv(t, seen)
	p.nextMsg(t)
	assert.Nil(t, req.Ask)
	assert.JSONEq(t, `{"elicitation":{}}`, string(req.ClientCapabilities))

	// initialize records the capabilities, raw.
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+clientCaps+`}}`)
	req = recv(t, seen)
	p.nextMsg(t)
	assert.JSONEq(t, clientCaps, string(req.ClientCapabilities))
	assert.Nil(t, req.Ask)
	sess := recv(t, h.opened)
	assert.JSONEq(t, clientCaps, string(sess.ClientCapabilities()))

	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}`)
	req = recv(t, seen)
	p.nextMsg(t)
	assert.NotNil(t, req.Ask)
	assert.JSONEq(t, clientCaps, string(req.ClientCapabilities))
}

func TestStdioRequestTimeoutCancelsIt(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 50*time.Millisecond)
	})
	p := startStdio(t, h, StdioOptions{})
	sess := initStdio(t, p, h)

	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := sess.Request(ctx, "elicitation/create", json.RawMessage(`{"message":"?"}`))
		errc <- err
	}()
	req := p.nextMsg(t)
	require.Equal(t, "elicitation/create", req.Method)
	note := p.nextMsg(t) // never answered: the server gives up and says so
	assert.Equal(t, "notifications/cancelled", note.Method)
	assert.JSONEq(t, string(req.ID), string(members(note.Params)["requestId"]))
	assert.ErrorIs(t, recv(t, errc), context.DeadlineExceeded)

	// An Ask too.
	p.send(t, `{"jsonrpc":"2.0","id":9,"method":"ask"}`)
	ask := p.nextMsg(t)
	note = p.nextMsg(t)
	assert.Equal(t, "notifications/cancelled", note.Method)
	assert.JSONEq(t, string(ask.ID), string(members(note.Params)["requestId"]))
	resp := p.nextMsg(t)
	assert.JSONEq(t, `9`, string(resp.ID))
	assert.Contains(t, string(resp.Result), "deadline exceeded")

	// Late and unknown responses are dropped: the next line is ping's.
	p.send(t, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"action":"accept"}}`)
	p.send(t, `{"jsonrpc":"2.0","id":"s-99","error":{"code":-32603,"message":"x"}}`)
	p.send(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
	p.send(t, `{"jsonrpc":"2.0","id":10,"method":"ping"}`)
	assert.JSONEq(t, `10`, string(p.nextMsg(t).ID))
	assert.Empty(t, h.notified, "client responses never reach Notified")
}

func TestStdioAskEndsWithItsRequest(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	p := startStdio(t, h, StdioOptions{})
	initStdio(t, p, h)

	p.send(t, `{"jsonrpc":"2.0","id":"call","method":"ask"}`)
	ask := p.nextMsg(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call"}}`)
	note := p.nextMsg(t)
	assert.Equal(t, "notifications/cancelled", note.Method)
	assert.JSONEq(t, string(ask.ID), string(members(note.Params)["requestId"]))
	// The cancelled request gets no response: the next line is ping's.
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	assert.JSONEq(t, `2`, string(p.nextMsg(t).ID))
}

func TestStdioPendingRequestsAreBounded(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	p := startStdio(t, h, StdioOptions{})
	sess := initStdio(t, p, h)

	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, MaxPendingRequests)
	for range MaxPendingRequests {
		go func() {
			_, err := sess.Request(ctx, "roots/list", nil)
			errs <- err
		}()
	}
	ids := map[string]bool{}
	for range MaxPendingRequests {
		ids[string(p.nextMsg(t).ID)] = true
	}
	assert.Len(t, ids, MaxPendingRequests, "every id is unique")

	start := time.Now()
	_, err := sess.Request(context.Background(), "roots/list", nil)
	assert.ErrorIs(t, err, ErrTooManyRequests)
	assert.Less(t, time.Since(start), time.Second, "over the bound fails at once")

	// An answer frees a place.
	p.send(t, `{"jsonrpc":"2.0","id":"s-1","result":{"roots":[]}}`)
	assert.NoError(t, recv(t, errs))
	got := make(chan error, 1)
	go func() {
		_, err := sess.Request(ctx, "roots/list", nil)
		got <- err
	}()
	assert.Equal(t, "roots/list", p.nextMsg(t).Method)

	cancel()
	for range MaxPendingRequests - 1 {
		assert.ErrorIs(t, recv(t, errs), context.Canceled)
	}
	assert.ErrorIs(t, recv(t, got), context.Canceled)
}

func TestStdioEndOfInputFailsPendingRequests(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	p := startStdio(t, h, StdioOptions{})
	sess := initStdio(t, p, h)

	errc := make(chan error, 1)
	go func() {
		_, err := sess.Request(context.Background(), "roots/list", nil)
		errc <- err
	}()
	p.nextMsg(t)
	p.in.Close()
	err := recv(t, errc)
	assert.ErrorIs(t, err, ErrSessionGone)
	assert.False(t, errors.Is(err, ErrNoStream))
	require.NoError(t, recv(t, p.served))
	_, err = sess.Request(context.Background(), "roots/list", nil)
	assert.ErrorIs(t, err, ErrSessionGone)
}
