package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecretsNeverAppearInProblems feeds a secret from the host and from an env_file into
// every field that accepts strings, each arranged to fail validation, and checks that the
// secret text appears in no problem.
func TestSecretsNeverAppearInProblems(t *testing.T) {
	const hostSecret = "hunter2-host-SECRET"
	const fileSecret = "s3cr3t-from-FILE"
	env := map[string]string{"S": hostSecret, "SURL": "http://" + hostSecret + ".example/mcp"}

	dir := writeFiles(t, map[string]string{
		".env": "F=" + fileSecret + "\nFURL=ftp://" + fileSecret + "/x\nbroken line " + fileSecret + "\n",
		"mcp.yaml": `version: 1
security:
  allowed_commands: [npx]
servers:
  stdio:
    env_file: .env
    command: '${S}'
    args: ['${S}', '${F}', '${MISSING_ONE}']
    cwd: '${F}'
    transport: '${S}'
    protocol: '${S}'
    required: '${S}'
    insecure: '${F}'
    truely-stateless: '${S}'
    connect_timeout: '${S}'
    request_timeout: '${F}'
    sessionId: '${S}'
    lease_reminder: '${F}'
    env:
      A: {env: S}
      B: '${S}-${NOT_SET}'
      C: {env: ALSO_NOT_SET}
    tools:
      mode: '${S}'
      whitelist: ['${S}']
      defaults: {timeout: '${S}', max_instances: '${F}'}
      config:
        t: {timeout: '${F}', max_instances: '${S}'}
    transform:
      - prefix: '${S}'
      - prefix: {remove: '${F}', add: '${S}'}
      - suffix: '${S}'
    lease: {idle_ttl: '${S}', max_instances: '${F}', prewarm: '${S}'}
  cmd:
    env_file: .env
    command: '/opt/${S}/bin/${F}'
  remote:
    env_file: .env
    url: '${SURL}'
    headers:
      Authorization: 'Bearer ${S}'
      X-File: {env: F}
      X-Break: "${S}\n"
  remote2:
    env_file: .env
    transport: sse
    url: '${FURL}'
  envpath:
    command: npx
    env_file: '${S}/.env'
    env: {X: {env: NOPE}}
  remote3:
    transport: http
    url: 'https://${S}:${S}@[bad'
`,
	})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, envOf(env))
	require.NotNil(t, ws)
	assert.ElementsMatch(t, []string{"stdio", "cmd", "remote", "remote2", "envpath", "remote3"}, ws.Rejected)
	require.Greater(t, len(problems), 20, "every field should have failed: %s", render(problems))

	all := render(problems)
	assert.NotContains(t, all, hostSecret)
	assert.NotContains(t, all, fileSecret)
	assert.NotContains(t, strings.ToLower(all), "hunter2")
	// The problems still name what to fix.
	assert.Contains(t, all, "variable MISSING_ONE")
	assert.Contains(t, all, "host variable ALSO_NOT_SET is not set")
}

// TestSecretsIncludeEveryExpandedText: a text that ${VAR} or {env: VAR} takes from the
// host or an env file is a secret whichever field it lands in, a URL path or an argument
// as much as a header, so Secrets and Server.FromEnv list it; defaults and literal
// text written in the config are not listed.
func TestSecretsIncludeEveryExpandedText(t *testing.T) {
	env := map[string]string{
		"PATHSEC": "pathsecret777",
		"ARGSEC":  "argsecret4242",
		"CMDSEC":  "cmd-secret-dir",
		"HDRSEC":  "hdr-secret-99",
		"SPACED":  "two words/and slash",
		"EMPTY":   "",
	}
	dir := writeFiles(t, map[string]string{
		".env": "FILESEC=file-secret-0451\n",
		"mcp.yaml": `version: 1
servers:
  h:
    truely-stateless: true
    url: "http://127.0.0.1:1/${PATHSEC}/${SPACED}/mcp"
    headers: {X-Key: "k-${HDRSEC}"}
  a:
    truely-stateless: true
    env_file: .env
    command: "/opt/${CMDSEC}/run"
    args: ["--token=${ARGSEC}", "${FILESEC}", "${EMPTY}", "${UNSET:-default-arg-1}", "literal-arg-9"]
    env: {E: {env: FILESEC}}
`,
	})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, envOf(env))
	require.NotNil(t, ws)
	require.Empty(t, ws.Rejected, render(problems))

	h, a := ws.Server("h"), ws.Server("a")
	require.NotNil(t, h)
	require.NotNil(t, a)
	assert.Equal(t, []string{"pathsecret777", "two words/and slash", "hdr-secret-99"}, h.FromEnv)
	assert.Equal(t, []string{"cmd-secret-dir", "argsecret4242", "file-secret-0451"}, a.FromEnv,
		"each text once, empty values and defaults left out")

	secrets := ws.Secrets()
	for _, want := range []string{"pathsecret777", "argsecret4242", "cmd-secret-dir", "hdr-secret-99", "file-secret-0451",
		"two words/and slash", "two%20words%2Fand%20slash", "two+words%2Fand+slash"} {
		assert.Contains(t, secrets, want)
	}
	for _, not := range []string{"default-arg-1", "literal-arg-9", ""} {
		assert.NotContains(t, secrets, not)
	}
}
