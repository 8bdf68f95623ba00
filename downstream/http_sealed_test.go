package downstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sealed"
)

func keysOf(t *testing.T, fills ...byte) *sealed.Keys {
	t.Helper()
	var ks [][]byte
	for _, b := range fills {
		ks = append(ks, bytes.Repeat([]byte{b}, sealed.KeySize))
	}
	r, err := sealed.NewRing(ks...)
	require.NoError(t, err)
	k := &sealed.Keys{}
	k.Set(r)
	return k
}

const sealedInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"mover","version":"7"}}}`

func openSealed(t *testing.T, s *httpServer) string {
	t.Helper()
	resp := s.post(t, sealedInit, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	id := resp.Header.Get(headerSessionID)
	require.NotEmpty(t, id)
	return id
}

const listBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// A session opened on one replica goes on at another holding the key: the
// other takes it up with the state its id carries, and the Handler hears
// the initialize again before the request.
func TestSealedSessionGoesOnAtAnotherReplica(t *testing.T) {
	keys := keysOf(t, 1)
	a := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keys, SessionIDPrefix: "r1-", Replica: "r1"})
	bFake := newHTTPFake()
	b := serveHTTP(t, bFake, HTTPOptions{SessionKeys: keys, SessionIDPrefix: "r2-", Replica: "r2"})

	id := openSealed(t, a)
	assert.True(t, strings.HasPrefix(id, "r1-."), "the replica's label leads the id: %s", id)
	assert.LessOrEqual(t, len(id), MaxSessionIDLen)
	assert.NotContains(t, id, "mover")
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "r1-."))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "mover", "the state is sealed, not just encoded")

	resp := b.sessionPost(t, id, listBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"method":"tools/list"}`, string(readMessage(t, resp).Result))
	assert.Equal(t, []string{"initialize", "tools/list"}, bFake.seen())
	opened := recv(t, bFake.opened)
	assert.Equal(t, id, opened.Key())
	assert.Equal(t, "r1", Resumed(opened))
	bFake.mu.Lock()
	init, call := bFake.requests[0], bFake.requests[1]
	bFake.mu.Unlock()
	var params map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(init.Msg.Params, &params))
	assert.JSONEq(t, `"2025-06-18"`, string(params["protocolVersion"]))
	assert.JSONEq(t, `{"roots":{"listChanged":true}}`, string(params["capabilities"]))
	assert.JSONEq(t, `{"name":"mover","version":"7"}`, string(params["clientInfo"]))
	assert.Equal(t, "2025-06-18", call.Protocol)
	assert.JSONEq(t, `{"roots":{"listChanged":true}}`, string(call.ClientCapabilities))
	assert.Same(t, opened, call.Session)

	// The next request finds the session open: no second take-up.
	resp = b.sessionPost(t, id, listBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	assert.Equal(t, []string{"initialize", "tools/list", "tools/list"}, bFake.seen())
	// Where it began, it is no take-up at all.
	resp = a.sessionPost(t, id, listBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
}

// Every id that does not open under the keys in force gets the 404 of an
// unknown session, and never reaches the Handler.
func TestSealedSessionRefusals(t *testing.T) {
	issuer := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keysOf(t, 1), SessionIDPrefix: "r1-"})
	id := openSealed(t, issuer)
	old := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keysOf(t, 1), SessionMaxAge: time.Nanosecond})
	expired := openSealed(t, old)

	dot := strings.LastIndexByte(id, '.')
	raw, err := base64.RawURLEncoding.DecodeString(id[dot+1:])
	require.NoError(t, err)
	raw[len(raw)-1] ^= 0x01
	flipped := id[:dot+1] + base64.RawURLEncoding.EncodeToString(raw)

	for _, tc := range []struct {
		name string
		keys *sealed.Keys
		id   string
	}{
		{"one bit altered", keysOf(t, 1), flipped},
		{"the label altered", keysOf(t, 1), "r2-" + id[len("r1-"):]},
		{"sealed with a removed key", keysOf(t, 2), id},
		{"past its expiry", keysOf(t, 1), expired},
		{"no key here", nil, id},
		{"too long", keysOf(t, 1), id + strings.Repeat("A", MaxSessionIDLen)},
		{"a random id", keysOf(t, 1), "0123456789abcdef0123456789abcdef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHTTPFake()
			s := serveHTTP(t, f, HTTPOptions{SessionKeys: tc.keys})
			requireRefused(t, s.sessionPost(t, tc.id, listBody), http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
			assert.Empty(t, f.seen())
		})
	}
	t.Run("past its expiry where it began", func(t *testing.T) {
		requireRefused(t, old.sessionPost(t, expired, listBody), http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	})
}

// Rotation: a key put first seals from then on while the old one still
// opens; once the old key is removed, its ids open no more.
func TestSealedSessionKeyRotation(t *testing.T) {
	keys := keysOf(t, 1)
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keys})
	before := openSealed(t, s)

	keys.Set(keysOf(t, 2, 1).Ring()) // the new key first, the old one kept
	after := openSealed(t, s)
	other := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keysOf(t, 2, 1)})
	for _, id := range []string{before, after} {
		resp := other.sessionPost(t, id, listBody)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		readMessage(t, resp)
	}
	rotated := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keysOf(t, 2)})
	requireRefused(t, rotated.sessionPost(t, before, listBody), http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	resp := rotated.sessionPost(t, after, listBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
}

// A draining replica takes up no session of another: the balancer sends
// the request on.
func TestSealedSessionNotTakenUpWhileDraining(t *testing.T) {
	keys := keysOf(t, 1)
	a := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keys})
	id := openSealed(t, a)
	f := newHTTPFake()
	b := serveHTTP(t, f, HTTPOptions{SessionKeys: keys})
	b.tr.Drain()
	requireRefused(t, b.sessionPost(t, id, listBody), http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "draining")
	assert.Empty(t, f.seen())
}

// logging/setLevel in a sealed session is answered with a new id that
// carries the level: a replica taking the session up by it applies the
// level by the same path. The first id stays valid where it was issued.
func TestSealedSessionCarriesTheLogLevel(t *testing.T) {
	keys := keysOf(t, 1)
	a := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keys, SessionIDPrefix: "r1-", Replica: "r1"})
	bFake := newHTTPFake()
	b := serveHTTP(t, bFake, HTTPOptions{SessionKeys: keys})
	id := openSealed(t, a)

	resp := a.sessionPost(t, id, `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"nonsense"}}`)
	readMessage(t, resp)
	assert.Empty(t, resp.Header.Get(headerSessionID), "no new id for a level that is none")
	resp = a.sessionPost(t, id, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	next := resp.Header.Get(headerSessionID)
	require.NotEmpty(t, next)
	assert.NotEqual(t, id, next)
	assert.True(t, strings.HasPrefix(next, "r1-."))
	assert.Equal(t, 1, a.tr.Sessions(), "one session, two ids")
	for _, use := range []string{id, next} {
		resp := a.sessionPost(t, use, listBody)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		readMessage(t, resp)
	}

	resp = b.sessionPost(t, next, listBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	assert.Equal(t, []string{"initialize", "logging/setLevel", "tools/list"}, bFake.seen())
	bFake.mu.Lock()
	assert.JSONEq(t, `{"level":"debug"}`, string(bFake.requests[1].Msg.Params))
	bFake.mu.Unlock()

	// DELETE by either id ends the session and both ids.
	del := a.request(t, http.MethodDelete, "", map[string]string{headerSessionID: next})
	del.Body.Close()
	require.Equal(t, http.StatusOK, del.StatusCode)
	assert.Equal(t, 0, a.tr.Sessions())
	a.tr.mu.Lock()
	assert.Empty(t, a.tr.aliases)
	a.tr.mu.Unlock()
	for _, gone := range []string{id, next} {
		requireRefused(t, a.sessionPost(t, gone, listBody), http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	}
}

// A client whose GET stream was cut with its replica reconnects it at
// another: the GET takes the session up, and the stream carries what the
// Handler sends the session there.
func TestSealedSessionGetStreamReconnects(t *testing.T) {
	keys := keysOf(t, 1)
	a := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionKeys: keys})
	id := openSealed(t, a)
	bFake := newHTTPFake()
	b := serveHTTP(t, bFake, HTTPOptions{SessionKeys: keys})

	resp, _ := b.openStream(t, id)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sess := recv(t, bFake.opened)
	assert.Equal(t, id, sess.Key())
	assert.Equal(t, []string{"initialize"}, bFake.seen(), "only the replayed initialize reached the Handler")
	note := &jsonrpc.Message{Method: "notifications/tools/list_changed"}
	eventually(t, func() bool { return sess.Notify(note) }, "the stream is registered")
	got, err := newSSE(resp.Body).next()
	require.NoError(t, err)
	assert.Equal(t, "notifications/tools/list_changed", got.Method)
}

// serveAsSubjects serves the transport behind a stand-in for the gateway's
// OAuth authentication: the X-Sub header names the subject, of one issuer,
// calling through the client "app" with a token.
func serveAsSubjects(t *testing.T, h *httpFake, opts HTTPOptions) *httpServer {
	t.Helper()
	return serveAs(t, h, opts, func(r *http.Request) identity.Caller {
		sub := r.Header.Get("X-Sub")
		return identity.Caller{Principal: identity.Subject("https://id.example", sub), Client: "app",
			Claims: map[string]any{"sub": sub}, Token: identity.NewSecret("token-of-" + sub)}
	})
}

// A sealed id carries its OAuth user's issuer and subject: the replica
// that takes the session up binds it to that user, and another user of
// the same client gets the 404 of an unknown session. The user's token
// travels in no id and stays with no session.
func TestSealedSessionKeepsItsSubject(t *testing.T) {
	keys := keysOf(t, 1)
	a := serveAsSubjects(t, newHTTPFake(), HTTPOptions{SessionKeys: keys, SessionIDPrefix: "r1-", Replica: "r1"})
	bFake := newHTTPFake()
	b := serveAsSubjects(t, bFake, HTTPOptions{SessionKeys: keys, SessionIDPrefix: "r2-", Replica: "r2"})

	resp := a.post(t, sealedInit, map[string]string{"X-Sub": "alice"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	id := resp.Header.Get(headerSessionID)
	require.True(t, strings.HasPrefix(id, "r1-."), id)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "r1-."))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "alice")

	requireRefused(t, b.post(t, listBody, map[string]string{headerSessionID: id, "X-Sub": "bob"}),
		http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	assert.Empty(t, bFake.seen(), "bob's request took nothing up")

	resp = b.post(t, listBody, map[string]string{headerSessionID: id, "X-Sub": "alice"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	alice := identity.Subject("https://id.example", "alice")
	opened := recv(t, bFake.opened)
	assert.Equal(t, alice, opened.Principal())
	caller := opened.(CallerSession).Caller()
	assert.Equal(t, alice, caller.Principal)
	assert.Equal(t, "app", caller.Client)
	assert.True(t, caller.Token.IsZero(), "a session keeps no token")
	last := bFake.last()
	assert.Equal(t, alice, last.Principal)
	assert.Equal(t, "app", last.Client)
}
