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
