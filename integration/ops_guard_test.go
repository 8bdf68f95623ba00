package integration

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpsEndpointsRefuseForeignHostAndOrigin: the endpoints beside /mcp (the probes,
// /metrics, the status pages and POST /drain) refuse a foreign Origin, and on a loopback
// listener a foreign Host, as /mcp does. A web page can then neither drain the gateway
// with a cross-site form post (a text/plain POST needs no preflight) nor read what it
// runs through a host name re-pointed at 127.0.0.1. The gateway's own origin and
// loopback names are served.
func TestOpsEndpointsRefuseForeignHostAndOrigin(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, replicaConfig())}})
	a.waitLoaded()
	base, err := url.Parse(strings.TrimSuffix(a.url, "/mcp"))
	require.NoError(t, err)
	do := func(method, path, host string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base.String()+path, strings.NewReader("drain"))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(body)
	}
	foreignOrigin := map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}
	foreignHost := "evil.example:" + base.Port()
	endpoints := []struct{ method, path string }{
		{http.MethodPost, "/drain"},
		{http.MethodGet, "/healthz"},
		{http.MethodGet, "/readyz"},
		{http.MethodGet, "/metrics"},
		{http.MethodGet, "/status"},
		{http.MethodGet, "/status.json"},
	}
	for _, e := range endpoints {
		code, body := do(e.method, e.path, "", foreignOrigin)
		assert.Equal(t, http.StatusForbidden, code, "%s %s with Origin https://evil.example: %.300s", e.method, e.path, body)
		assert.Contains(t, body, "http.allowed_origins", "%s %s: the refusal names the fix", e.method, e.path)
		code, body = do(e.method, e.path, foreignHost, map[string]string{"Content-Type": "text/plain"})
		assert.Equal(t, http.StatusForbidden, code, "%s %s with Host %s: %.300s", e.method, e.path, foreignHost, body)
		assert.Contains(t, body, "localhost", "%s %s: the refusal names the fix", e.method, e.path)
	}
	for _, e := range endpoints[1:] {
		code, body := do(e.method, e.path, "", map[string]string{"Origin": "http://" + base.Host})
		assert.Equal(t, http.StatusOK, code, "%s %s from the gateway's own origin: %.300s", e.method, e.path, body)
		code, body = do(e.method, e.path, "localhost:"+base.Port(), nil)
		assert.Equal(t, http.StatusOK, code, "%s %s with Host localhost: %.300s", e.method, e.path, body)
	}
	assert.False(t, a.log.containsLine("msg=draining"), "a refused POST /drain drained the gateway:\n%s", a.log)
	code, body := do(http.MethodGet, "/readyz", "", nil)
	assert.Equal(t, http.StatusOK, code, "the gateway still serves: %s", body)
}
