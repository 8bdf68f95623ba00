package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpsReadyzShowsReasonsOnlyToClients: with http.auth, /readyz answers a
// caller without credentials (a load balancer) with its status and the
// ready flag alone; why the gateway is not ready (server names, their
// errors) is for an authenticated client.
func TestOpsReadyzShowsReasonsOnlyToClients(t *testing.T) {
	t.Parallel()
	token := randomToken(t)
	broken := filepath.Join(t.TempDir(), "broken") // while it exists, starts fail
	script := `if [ -e "$1" ]; then echo "dial tcp 10.1.2.3:8200: connection refused" >&2; exit 3; fi; exec "$2" demo-server misbehave crash-after 1`
	config := `version: 1
http:
  auth:
    tokens:
      ops: { env: OPS_TOKEN }
servers:
  vault:
    required: true
    truely-stateless: true
    command: /bin/sh
    args: ['-c', ` + quoted(script) + `, sh, ` + quoted(broken) + `, ` + quoted(binary) + `]
    transform: [{prefix: vault_}]
`
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, config)}, env: []string{"OPS_TOKEN=" + token}})
	a.waitLoaded()
	ready := opsBase(a) + "/readyz"
	code, _, body := opsGet(t, http.DefaultClient, ready)
	require.Equal(t, http.StatusOK, code, "%s", body)

	require.NoError(t, os.WriteFile(broken, nil, 0o644))
	c := a.connectAs(token)
	require.NotEmpty(t, c.callTool("vault_ping_tool", map[string]any{}).Error, "the crashing call fails")
	relLogLine(t, a, relRecoverTimeout, `msg="lease spawn-failed"`, "server=vault")

	code, _, body = opsGet(t, http.DefaultClient, ready)
	assert.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	assertJSONEqual(t, []byte(`{"ready":false}`), body)

	code, body = getAs(t, ready, "not-a-valid-token-0123456789")
	assert.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	assertJSONEqual(t, []byte(`{"ready":false}`), body)

	code, body = getAs(t, ready, token)
	assert.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	assert.Contains(t, string(body), `required server \"vault\"`, "an authenticated client is told why")
}
