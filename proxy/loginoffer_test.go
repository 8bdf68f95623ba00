package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

func TestDeclaresURLElicitation(t *testing.T) {
	for caps, want := range map[string]bool{
		`{"elicitation":{"url":{}}}`:           true,
		`{"elicitation":{"form":{},"url":{}}}`: true,
		`{"elicitation":{}}`:                   false, // form only
		`{"elicitation":{"form":{}}}`:          false,
		`{"sampling":{}}`:                      false,
		`{"elicitation":{"url":null}}`:         false,
		`not json`:                             false,
		``:                                     false,
	} {
		assert.Equal(t, want, declaresURLElicitation(json.RawMessage(caps)), caps)
	}
}

func TestLoginOffer(t *testing.T) {
	offered := 0
	p := New(Options{OfferLogin: func(_ context.Context, server string) (string, string, *LoginDone, error) {
		offered++
		return "https://auth.example/authorize?state=s&x=<y>", "el-1", nil, nil
	}})
	needsLogin := fmt.Errorf("server %q: %w", "linear", &oauth.LoginRequiredError{Server: "linear", Reason: "not logged in"})
	urlClient := &downstream.Request{ClientCapabilities: json.RawMessage(`{"elicitation":{"url":{}}}`)}
	formClient := &downstream.Request{ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)}

	assert.Nil(t, p.loginOffer(context.Background(), formClient, "linear", needsLogin), "a client without URL mode gets the plain error")
	assert.Nil(t, p.loginOffer(context.Background(), urlClient, "linear", errors.New("connection refused")), "only a missing login is offered")
	assert.Nil(t, p.loginOffer(context.Background(), nil, "linear", needsLogin))
	assert.Equal(t, 0, offered)

	e := p.loginOffer(context.Background(), urlClient, "linear", needsLogin)
	require.NotNil(t, e)
	assert.Equal(t, -32042, e.Code)
	assert.JSONEq(t, `{"elicitations":[{"mode":"url","elicitationId":"el-1","url":"https://auth.example/authorize?state=s&x=<y>",
		"message":"MCP server \"linear\" needs you to log in. Open the link, approve the access, then try again."}]}`, string(e.Data))

	failing := New(Options{OfferLogin: func(context.Context, string) (string, string, *LoginDone, error) {
		return "", "", nil, errors.New("no network")
	}})
	assert.Nil(t, failing.loginOffer(context.Background(), urlClient, "linear", needsLogin), "an offer that cannot be made leaves the plain error")
}

// notifySession records what it is sent.
type notifySession struct {
	fakeSession
	sent chan *jsonrpc.Message
}

func (s notifySession) Notify(m *jsonrpc.Message) bool { s.sent <- m; return true }

// Every session offered a login is told, once, when it succeeds; none is
// told of a login that failed.
func TestLoginOfferCompletes(t *testing.T) {
	done := NewLoginDone()
	p := New(Options{OfferLogin: func(context.Context, string) (string, string, *LoginDone, error) {
		return "https://auth.example/authorize", "el-7", done, nil
	}})
	needsLogin := &oauth.LoginRequiredError{Server: "linear", Reason: "not logged in"}
	caps := json.RawMessage(`{"elicitation":{"url":{}}}`)
	a := notifySession{fakeSession: "a", sent: make(chan *jsonrpc.Message, 4)}
	b := notifySession{fakeSession: "b", sent: make(chan *jsonrpc.Message, 4)}
	for _, s := range []notifySession{a, a, b} { // a asks twice
		require.NotNil(t, p.loginOffer(context.Background(), &downstream.Request{ClientCapabilities: caps, Session: s}, "linear", needsLogin))
	}
	// A 2026-07-28 client (over stdio its connection is a Session) is
	// offered the login with no elicitationId, and told nothing: it retries.
	m := notifySession{fakeSession: "m", sent: make(chan *jsonrpc.Message, 4)}
	offer := p.loginOffer(context.Background(), &downstream.Request{ClientCapabilities: caps, Session: m, Protocol: "2026-07-28"}, "linear", needsLogin)
	require.NotNil(t, offer)
	assert.JSONEq(t, `{"elicitations":[{"mode":"url","url":"https://auth.example/authorize",
		"message":"MCP server \"linear\" needs you to log in. Open the link, approve the access, then try again."}]}`, string(offer.Data))
	assert.Empty(t, a.sent, "nothing before the login ends")
	done.Finish(true)
	done.Finish(false) // the first end counts
	for _, s := range []notifySession{a, b} {
		select {
		case m := <-s.sent:
			assert.Equal(t, "notifications/elicitation/complete", m.Method)
			assert.JSONEq(t, `{"elicitationId":"el-7"}`, string(m.Params))
			assert.Nil(t, m.ID)
		case <-time.After(10 * time.Second):
			t.Fatalf("session %s was not told the login completed", s.Key())
		}
	}
	assert.Never(t, func() bool { return len(a.sent) > 0 }, 100*time.Millisecond, 10*time.Millisecond, "a session is told once")
	assert.Empty(t, m.sent, "a 2026-07-28 client is sent no notifications/elicitation/complete")

	failed := NewLoginDone()
	q := New(Options{OfferLogin: func(context.Context, string) (string, string, *LoginDone, error) {
		return "https://auth.example/authorize", "el-8", failed, nil
	}})
	c := notifySession{fakeSession: "c", sent: make(chan *jsonrpc.Message, 1)}
	require.NotNil(t, q.loginOffer(context.Background(), &downstream.Request{ClientCapabilities: caps, Session: c}, "linear", needsLogin))
	failed.Finish(false)
	assert.Never(t, func() bool { return len(c.sent) > 0 }, 100*time.Millisecond, 10*time.Millisecond, "a failed login completes nothing")
}

// TestAskLogin: a 2026-07-28 request held by the bridge is asked the login
// through its Ask, as a URL-mode elicitation without elicitationId. Accept
// waits for the login to end and asks for the call again; decline ends the
// call; after maxLoginOffers the answer is the link. Other requests are left
// to loginOffer.
func TestAskLogin(t *testing.T) {
	done := NewLoginDone()
	p := New(Options{OfferLogin: func(_ context.Context, server string) (string, string, *LoginDone, error) {
		return "https://auth.example/authorize?state=s", "el-1", done, nil
	}})
	needsLogin := fmt.Errorf("server %q: %w", "linear", &oauth.LoginRequiredError{Server: "linear", Reason: "not logged in", PerUser: true})
	var asked []json.RawMessage
	answer := `{"action":"accept"}`
	modern := func(caps string) *downstream.Request {
		return &downstream.Request{Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(caps),
			Ask: func(_ context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
				assert.Equal(t, "elicitation/create", method)
				asked = append(asked, params)
				return &jsonrpc.Message{Result: json.RawMessage(answer)}, nil
			}}
	}
	urlCaps := `{"elicitation":{"url":{}}}`

	for name, req := range map[string]*downstream.Request{
		"form-only client": modern(`{"elicitation":{}}`),
		"older client":     {Protocol: "2025-11-25", ClientCapabilities: json.RawMessage(urlCaps), Ask: modern(urlCaps).Ask},
		"no Ask":           {Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(urlCaps)},
	} {
		offers := 0
		_, _, handled := p.askLogin(context.Background(), req, "linear", needsLogin, &offers)
		assert.False(t, handled, name)
	}
	offers := 0
	_, _, handled := p.askLogin(context.Background(), modern(urlCaps), "linear", errors.New("connection refused"), &offers)
	assert.False(t, handled, "only a missing login is offered")
	require.Empty(t, asked)

	// Accepted, the login done: the call is tried again.
	done.Finish(true)
	again, rpcErr, handled := p.askLogin(context.Background(), modern(urlCaps), "linear", needsLogin, &offers)
	assert.True(t, handled)
	assert.True(t, again)
	assert.Nil(t, rpcErr)
	require.Len(t, asked, 1)
	assert.JSONEq(t, `{"mode":"url","url":"https://auth.example/authorize?state=s",
		"message":"MCP server \"linear\" needs you to log in. Open the link and approve the access; the call goes on once you have."}`, string(asked[0]))

	// Declined: the call ends.
	answer = `{"action":"decline"}`
	again, rpcErr, handled = p.askLogin(context.Background(), modern(urlCaps), "linear", needsLogin, &offers)
	assert.True(t, handled)
	assert.False(t, again)
	require.NotNil(t, rpcErr)
	assert.Contains(t, rpcErr.Message, "not accepted")

	// Offered maxLoginOffers times: the link, and no more asking.
	answer = `{"action":"accept"}`
	for offers < maxLoginOffers {
		_, _, handled = p.askLogin(context.Background(), modern(urlCaps), "linear", needsLogin, &offers)
		require.True(t, handled)
	}
	n := len(asked)
	again, rpcErr, handled = p.askLogin(context.Background(), modern(urlCaps), "linear", needsLogin, &offers)
	assert.True(t, handled)
	assert.False(t, again)
	require.NotNil(t, rpcErr)
	assert.Contains(t, rpcErr.Message, "open https://auth.example/authorize?state=s")
	assert.Len(t, asked, n, "not asked again")
}
