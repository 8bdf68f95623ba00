package credential

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// tagging is a transport that marks the requests it carries.
type tagging string

func (t tagging) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Set("X-Via", string(t))
	return http.DefaultTransport.RoundTrip(out)
}

func TestByCaller(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.Header.Get("X-Via"))) }))
	defer up.Close()
	client := &http.Client{Transport: ByCaller(tagging("caller"), tagging("service"))}
	via := func(ctx context.Context) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		buf := make([]byte, 16)
		n, _ := resp.Body.Read(buf)
		return string(buf[:n])
	}
	assert.Equal(t, "service", via(context.Background()), "a request no caller made")
	assert.Equal(t, "caller", via(identity.WithCaller(context.Background(), caller("alice", "tok"))))
	assert.Equal(t, "caller", via(identity.WithCaller(context.Background(), identity.ClientCaller("bot"))))
	assert.Equal(t, "service", via(identity.WithCaller(context.Background(), identity.Caller{Principal: identity.Local()})),
		"the local user is no caller with credentials of their own")
}
