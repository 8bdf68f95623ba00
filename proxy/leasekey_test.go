package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// fakeSession is a downstream session with a fixed key.
type fakeSession string

func (s fakeSession) Key() string                         { return string(s) }
func (s fakeSession) Notify(*jsonrpc.Message) bool        { return true }
func (s fakeSession) ClientCapabilities() json.RawMessage { return nil }
func (s fakeSession) Client() string                      { return "" }
func (s fakeSession) Request(context.Context, string, json.RawMessage) (*jsonrpc.Message, error) {
	return nil, downstream.ErrNoStream
}

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
		{"no session, meta lease", "", meta(`"conv-1"`), "meta:conv-1", false},
		{"no session, empty meta lease", "", meta(`""`), anonymousKey, true},
		{"no session, meta lease not a string", "", meta(`42`), anonymousKey, true},
		{"no session, other meta", "", map[string]json.RawMessage{"x": json.RawMessage(`"y"`)}, anonymousKey, true},
		{"session", "sess-1", nil, "session:sess-1", false},
		{"session wins over meta", "sess-1", meta(`"conv-1"`), "session:sess-1", false},
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
	assert.NotEqual(t, sessionKey("x"), session.Key("meta:x"), "a meta key cannot impersonate a session")
}
