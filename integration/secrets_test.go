package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecretsNeverLogged: an upstream that prints its token on stderr and
// fails, and a remote upstream whose URL carries a key, are reported in the
// log, in mcp_status and by `tools` without the secret ever appearing.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const token, key = "tok-7f3a9c2e-secret", "key-51b0d8e4-secret"
	config := `version: 1
servers:
  leaky:
    truely-stateless: true
    command: sh
    args: [-c, 'echo "my token is $TOKEN" >&2; exit 3']
    env: {TOKEN: "` + token + `"}
    connect_timeout: 5s
  remote:
    truely-stateless: true
    url: "http://127.0.0.1:1/mcp?api_key=` + key + `"
    connect_timeout: 2s
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    tools: {whitelist: [echo]}
`
	a := serveConfig(t, httpTransport, config)
	a.waitLoaded()
	c := a.connect()
	status := string(c.callToolResult("mcp_status", map[string]any{}))
	assert.Contains(t, status, "leaky", "the failing server is reported")
	assert.Contains(t, status, "remote")

	path := writeConfig(t, config)
	out, _ := exec.Command(binary, "tools", "--json", "--config", path).CombinedOutput()
	assert.Contains(t, string(out), "leaky")

	log := a.log.String() // loading is done: every start failure has been logged
	require.Contains(t, log, "my token is", "the upstream's stderr line is logged")
	for _, secret := range []string{token, key} {
		assert.NotContains(t, log, secret, "a secret reached the log")
		assert.NotContains(t, status, secret, "a secret reached mcp_status")
		assert.NotContains(t, string(out), secret, "a secret reached `tools --json`")
	}
	assert.True(t, strings.Contains(log, "<redacted>"), "secrets are replaced, not dropped silently")
}

// TestSecretsFromEnvNeverShown: values that ${VAR} takes from the environment or an
// env file are secrets wherever the config puts them. A remote server whose URL path
// carries one and a stdio server that echoes an argument holding another are reported
// in the log, in mcp_status and by `tools` without either value appearing.
func TestSecretsFromEnvNeverShown(t *testing.T) {
	t.Parallel()
	const pathSecret, argSecret, fileSecret = "pathsecret-5c81e2", "argsecret-93d0a7", "filesecret-4b62f1"
	config := `version: 1
servers:
  h3:
    truely-stateless: true
    url: "http://127.0.0.1:1/${SEC3}/mcp"
    connect_timeout: 3s
  a:
    truely-stateless: true
    env_file: secrets.env
    command: sh
    args: [-c, 'echo "arg is $1 and $2" >&2; exit 3', sh, '${SECA}', '${SECF}']
    connect_timeout: 5s
`
	path := writeConfig(t, config)
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(path), "secrets.env"), []byte("SECF="+fileSecret+"\n"), 0o600))
	env := []string{"SEC3=" + pathSecret, "SECA=" + argSecret}

	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}, env: env})
	a.waitLoaded()
	status := string(a.connect().callToolResult("mcp_status", map[string]any{}))
	assert.Contains(t, status, "h3", "the failing server is reported")

	tools := exec.Command(binary, "tools", "--config", path)
	tools.Env = markerEnv(newMarker(), env...)
	out, _ := tools.CombinedOutput()
	require.Contains(t, string(out), "127.0.0.1:1", "`tools` reports the failed connection")

	log := a.log.String()
	require.Contains(t, log, "arg is", "the upstream's stderr line is logged")
	require.Contains(t, log, "127.0.0.1:1", "the failed connection is logged")
	for _, secret := range []string{pathSecret, argSecret, fileSecret} {
		assert.NotContains(t, log, secret, "a secret reached the log")
		assert.NotContains(t, status, secret, "a secret reached mcp_status")
		assert.NotContains(t, string(out), secret, "a secret reached `tools`")
	}
}
