package credential

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

func TestCallerValue(t *testing.T) {
	c := identity.Caller{Principal: identity.Subject("https://issuer.example.com", "person-1"), Client: "agent-7",
		Claims: map[string]any{"sub": "person-1", "iss": "https://issuer.example.com", "email": "p@example.com",
			"age": float64(42), "admin": true, "roles": []any{"a"}, "evil": "x\r\nSet-Cookie: y"}, Token: identity.NewSecret("t")}
	tests := []struct {
		what, want string
		ok         bool
	}{
		{"subject", "person-1", true},
		{"client", "agent-7", true},
		{"issuer", "https://issuer.example.com", true},
		{"claim:email", "p@example.com", true},
		{"claim:age", "42", true},
		{"claim:admin", "true", true},
		{"claim:roles", "", false},
		{"claim:evil", "", false},
		{"claim:missing", "", false},
		{"other", "", false},
	}
	for _, tt := range tests {
		v, ok := Value(c, tt.what)
		assert.Equal(t, tt.ok, ok, tt.what)
		assert.Equal(t, tt.want, v, tt.what)
	}
	_, ok := Value(identity.Caller{}, "subject")
	assert.False(t, ok, "no caller, no value")
	_, ok = Value(identity.ClientCaller("ci"), "subject")
	assert.False(t, ok, "a static token's client has no subject")
	v, ok := Value(identity.ClientCaller("ci"), "client")
	assert.True(t, ok)
	assert.Equal(t, "ci", v)
}

func TestHeadersPerRequest(t *testing.T) {
	seen := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Clone() }))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	client := &http.Client{Transport: Headers(http.DefaultTransport, sameorigin.Origin(u), map[string]string{"X-User-Id": "subject"})}

	send := func(ctx context.Context, preset string) http.Header {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		if preset != "" {
			req.Header.Set("X-User-Id", preset)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return <-seen
	}
	alice := identity.WithCaller(context.Background(), identity.Caller{Principal: identity.Subject("https://id.example", "alice"), Client: "a"})
	bob := identity.WithCaller(context.Background(), identity.Caller{Principal: identity.Subject("https://id.example", "bob"), Client: "b"})
	assert.Equal(t, "alice", send(alice, "").Get("X-User-Id"))
	assert.Equal(t, "bob", send(bob, "").Get("X-User-Id"))
	assert.Empty(t, send(context.Background(), "forged").Values("X-User-Id"), "no caller: no header, and none kept from a request")
	assert.Equal(t, "bob", send(bob, "forged").Get("X-User-Id"))
}

func originOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return sameorigin.Origin(u)
}
