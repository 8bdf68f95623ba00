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

	"github.com/mcp-aggregator/mcp-aggregator/config"
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

// TestAskToolLogin: a 2026-07-28 request held by the bridge that calls a
// tool no server exports, while a server waits for a shared login, is asked
// that login. The accept waits for the login to end and then for the
// commit that takes the server out of its wait, and asks to resolve the
// tool again; a decline ends the call; the client going away ends the
// wait; after maxLoginOffers, or with no server waiting, it is left to the
// usual answers.
func TestAskToolLogin(t *testing.T) {
	var done *LoginDone
	p := New(Options{OfferLogin: func(_ context.Context, server string) (string, string, *LoginDone, error) {
		return "https://auth.example/authorize?state=" + server, "el-1", done, nil
	}})
	waiting := p.current().with()
	waiting.failed = map[string]failedServer{"linear": {why: `not logged in; run mcp-aggregator login linear`}}
	p.publish(waiting)
	asked := make(chan json.RawMessage, 8)
	answer := `{"action":"accept"}`
	modern := &downstream.Request{Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{"elicitation":{"url":{}}}`),
		Ask: func(_ context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
			assert.Equal(t, "elicitation/create", method)
			asked <- params
			return &jsonrpc.Message{Result: json.RawMessage(answer)}, nil
		}}

	older := *modern
	older.Protocol = "2025-11-25"
	offers := 0
	_, _, handled := p.askToolLogin(context.Background(), &older, p.current(), "linear_issue", &offers)
	assert.False(t, handled, "an older client gets -32042")
	_, _, handled = p.askToolLogin(context.Background(), modern, initialState(), "linear_issue", &offers)
	assert.False(t, handled, "no server waits")
	assert.Zero(t, offers)

	// Accepted: waits for the login, then for the commit that starts the
	// server.
	done = NewLoginDone()
	type outcome struct {
		again, handled bool
		rpcErr         *jsonrpc.Error
	}
	out := make(chan outcome, 1)
	go func() {
		var o outcome
		o.again, o.rpcErr, o.handled = p.askToolLogin(context.Background(), modern, p.current(), "linear_issue", &offers)
		out <- o
	}()
	params := <-asked
	var el map[string]string
	require.NoError(t, json.Unmarshal(params, &el))
	assert.Equal(t, "url", el["mode"])
	assert.Equal(t, "https://auth.example/authorize?state=linear", el["url"])
	assert.NotContains(t, el, "elicitationId")
	assert.Contains(t, el["message"], `unknown tool "linear_issue"`)
	done.Finish(true)
	started := p.current().with()
	started.starting = map[string]*config.Server{"linear": {ID: "linear"}}
	p.publish(started) // being started: still waiting
	assert.Never(t, func() bool { return len(out) > 0 }, 100*time.Millisecond, 10*time.Millisecond, "the retry went on before the server started")
	started = p.current().with()
	started.failed, started.starting = map[string]failedServer{}, nil
	p.publish(started)
	o := <-out
	assert.True(t, o.handled)
	assert.True(t, o.again)
	assert.Nil(t, o.rpcErr)
	assert.Equal(t, 1, offers)

	// Declined: the call ends.
	p.publish(waiting)
	answer = `{"action":"decline"}`
	again, rpcErr, handled := p.askToolLogin(context.Background(), modern, p.current(), "linear_issue", &offers)
	<-asked
	assert.True(t, handled)
	assert.False(t, again)
	require.NotNil(t, rpcErr)
	assert.Contains(t, rpcErr.Message, "not accepted")

	// Accepted, the login done, the client gone while the server starts.
	answer = `{"action":"accept"}`
	done = NewLoginDone()
	done.Finish(true)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-asked
		cancel()
	}()
	again, rpcErr, handled = p.askToolLogin(ctx, modern, p.current(), "linear_issue", &offers)
	assert.True(t, handled)
	assert.False(t, again)
	require.NotNil(t, rpcErr)
	assert.Contains(t, rpcErr.Message, "while it waited for the server to start")

	// Offered maxLoginOffers times: no more.
	require.Equal(t, maxLoginOffers, offers)
	_, _, handled = p.askToolLogin(context.Background(), modern, p.current(), "linear_issue", &offers)
	assert.False(t, handled)
	assert.Nil(t, p.unknownToolLoginOffer(context.Background(), modern, p.current(), "linear_issue"), "no -32042 to a 2026-07-28 request held by the bridge")
	assert.NotNil(t, p.unknownToolLoginOffer(context.Background(), &older, p.current(), "linear_issue"))
}
