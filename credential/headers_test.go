package credential

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

func TestCallerValue(t *testing.T) {
	c := NewCaller("agent-7", map[string]any{"sub": "person-1", "iss": "https://issuer.example.com", "email": "p@example.com",
		"age": float64(42), "admin": true, "roles": []any{"a"}, "evil": "x\r\nSet-Cookie: y"}, "t")
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
		v, ok := c.Value(tt.what)
		assert.Equal(t, tt.ok, ok, tt.what)
		assert.Equal(t, tt.want, v, tt.what)
	}
	_, ok := (*Caller)(nil).Value("subject")
	assert.False(t, ok, "no caller, no value")
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
	alice := WithCaller(context.Background(), NewCaller("a", map[string]any{"sub": "alice"}, ""))
	bob := WithCaller(context.Background(), NewCaller("b", map[string]any{"sub": "bob"}, ""))
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
