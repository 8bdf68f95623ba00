package proxy

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/session"
)

func TestLeaseKey(t *testing.T) {
	srv := server.NewMCPServer("test", "1")
	withSession := func(id string) context.Context {
		return srv.WithContext(context.Background(), server.NewInProcessSession(id, nil))
	}
	meta := func(v any) *mcp.Meta { return &mcp.Meta{AdditionalFields: map[string]any{LeaseMetaKey: v}} }

	tests := []struct {
		name      string
		ctx       context.Context
		meta      *mcp.Meta
		key       session.Key
		anonymous bool
	}{
		{"no session, no meta", context.Background(), nil, anonymousKey, true},
		{"no session, meta lease", context.Background(), meta("conv-1"), "meta:conv-1", false},
		{"no session, empty meta lease", context.Background(), meta(""), anonymousKey, true},
		{"no session, meta lease not a string", context.Background(), meta(42), anonymousKey, true},
		{"no session, other meta", context.Background(), &mcp.Meta{AdditionalFields: map[string]any{"x": "y"}}, anonymousKey, true},
		{"session", withSession("sess-1"), nil, "session:sess-1", false},
		{"session wins over meta", withSession("sess-1"), meta("conv-1"), "session:sess-1", false},
		{"session without an id falls back to meta", withSession(""), meta("conv-2"), "meta:conv-2", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, anonymous := LeaseKey(tc.ctx, tc.meta)
			assert.Equal(t, tc.key, key)
			assert.Equal(t, tc.anonymous, anonymous)
		})
	}
	assert.NotEqual(t, sessionKey("x"), session.Key("meta:x"), "a meta key cannot impersonate a session")
}
