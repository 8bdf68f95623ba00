package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// fakeSession is a downstream session with a fixed key.
type fakeSession string

func (s fakeSession) Key() string                         { return string(s) }
func (s fakeSession) Notify(*jsonrpc.Message) bool        { return true }
func (s fakeSession) ClientCapabilities() json.RawMessage { return nil }
func (s fakeSession) Principal() identity.Principal       { return identity.Local() }
func (s fakeSession) Request(context.Context, string, json.RawMessage) (*jsonrpc.Message, error) {
	return nil, downstream.ErrNoStream
}

// anonymousKey is the key shared by sessionless requests that name no
// lease, of no client's.
var anonymousKey = session.AnonymousKey(identity.Principal{})

// sessionKey is the key of the downstream session id, of no client's.
func sessionKey(id string) session.Key { return session.SessionKey(identity.Principal{}, id) }

func TestLeaseKey(t *testing.T) {
	meta := func(v string) map[string]json.RawMessage {
		return map[string]json.RawMessage{LeaseMetaKey: json.RawMessage(v)}
	}
	tests := []struct {
		name      string
		session   fakeSession
		meta      map[string]json.RawMessage
		key       session.Key
		anonymous bool
	}{
		{"no session, no meta", "", nil, anonymousKey, true},
		{"no session, meta lease", "", meta(`"conv-1"`), session.NamedKey(identity.Principal{}, "conv-1"), false},
		{"no session, empty meta lease", "", meta(`""`), anonymousKey, true},
		{"no session, meta lease not a string", "", meta(`42`), anonymousKey, true},
		{"no session, other meta", "", map[string]json.RawMessage{"x": json.RawMessage(`"y"`)}, anonymousKey, true},
		{"session", "sess-1", nil, sessionKey("sess-1"), false},
		{"session wins over meta", "sess-1", meta(`"conv-1"`), sessionKey("sess-1"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s *fakeSession
			if tc.session != "" {
				s = &tc.session
			}
			var key session.Key
			var anonymous bool
			if s != nil {
				key, anonymous = LeaseKey(*s, tc.meta)
			} else {
				key, anonymous = LeaseKey(nil, tc.meta)
			}
			assert.Equal(t, tc.key, key)
			assert.Equal(t, tc.anonymous, anonymous)
		})
	}
	assert.NotEqual(t, sessionKey("x"), session.NamedKey(identity.Principal{}, "x"), "a meta key cannot impersonate a session")
}

// A sessionless request's lease name is bounded: one over maxLeaseName is
// refused, naming the key and the bound, before any lease is taken. A
// session's request is not refused for a name it does not use.
func TestLeaseNameBounded(t *testing.T) {
	long := strings.Repeat("c", maxLeaseName+1)
	name := mustJSON(long)
	msg := &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call"}
	modern := &downstream.Request{Msg: msg, Protocol: "2026-07-28"}
	bad := leaseNameError(modern, name)
	require.NotNil(t, bad)
	assert.Equal(t, jsonrpc.CodeInvalidParams, bad.Error.Code)
	assert.Contains(t, bad.Error.Message, `_meta["`+LeaseMetaKey+`"] is 257 bytes, over the 256`)

	assert.Nil(t, leaseNameError(modern, mustJSON(long[:maxLeaseName])))
	assert.Nil(t, leaseNameError(modern, nil), "no name, nothing to refuse")
	legacy := &downstream.Request{Msg: msg, Protocol: "2025-11-25", Session: fakeSession("s")}
	assert.Nil(t, leaseNameError(legacy, name))

	p := newTestProxy(t)
	params, _ := json.Marshal(map[string]any{"name": "mcp_status", "_meta": map[string]string{LeaseMetaKey: long}})
	resp := p.Handle(context.Background(), &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`2`), Method: "tools/call", Params: params},
		Protocol: "2026-07-28", Send: func(*jsonrpc.Message) bool { return true }})
	require.NotNil(t, resp.Error, "%s", resp.Result)
	assert.Equal(t, jsonrpc.CodeInvalidParams, resp.Error.Code)
}

// TestLeaseSpace: only an authenticated client has a space of its own;
// the local user and addresses share one, as they did before clients were
// told apart.
func TestLeaseSpace(t *testing.T) {
	for _, client := range []string{"ci-bot", `a "quoted" name`, "with space meta:x", "ünïcode"} {
		key, _ := LeaseKeyOf(&downstream.Request{Principal: identity.Client(client)}, nil)
		assert.Equal(t, client, key.Client.Client(), "%q", client)
	}
	for _, p := range []identity.Principal{identity.Local(), identity.Address("192.0.2.7"), {}} {
		key, _ := LeaseKeyOf(&downstream.Request{Principal: p}, nil)
		assert.Equal(t, anonymousKey, key, "%v", p)
	}
	assert.Equal(t, sessionKey("abc"), sessionLeaseKey(fakeSession("abc")), "a stdio session's key is no client's")
}

// TestPrincipalOf: who a request is for, as a shared instance's unlinked
// requests are attributed: the authenticated client, else the address the
// gateway tells clients apart by, else the local user.
func TestPrincipalOf(t *testing.T) {
	for _, tc := range []struct {
		req  *downstream.Request
		want identity.Principal
	}{
		{&downstream.Request{Principal: identity.Client("ci-bot"), Holder: `client "ci-bot"`}, identity.Client("ci-bot")},
		{&downstream.Request{Principal: identity.Address("192.0.2.7"), Holder: "address 192.0.2.7"}, identity.Address("192.0.2.7")},
		{&downstream.Request{Principal: identity.Local()}, identity.Local()},
		{&downstream.Request{}, identity.Local()},
		{nil, identity.Principal{}},
	} {
		assert.Equal(t, tc.want, principalOf(tc.req))
	}
}
