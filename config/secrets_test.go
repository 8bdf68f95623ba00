package config

import (
	"encoding/base64"
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

// TestURLPathFromAVariableIsASecret: a variable whose text holds more than a URL's
// path (the whole URL) makes the path it filled in a secret of its own, since a
// network library quotes the URL with its password starred, not whole; a value in
// the path is a secret as escaped in a URL's path too. A path written in the config
// is not a secret, however it looks.
func TestURLPathFromAVariableIsASecret(t *testing.T) {
	env := map[string]string{
		"WHOLE":  "https://u:pw@hooks.example.com/T000/B000/XXXXSECRETXXXX?x=1",
		"BASE":   "https://api.example.com",
		"SPACED": "two words/and slash",
		"HOST":   "literal.example.com",
	}
	dir := writeFiles(t, map[string]string{"mcp.yaml": `version: 1
servers:
  whole: {url: "${WHOLE}"}
  base: {url: "${BASE}/v1/mcp"}
  spaced: {url: "https://api.example.com/${SPACED}/mcp"}
  literal: {url: "https://${HOST}/T000/B000/LITERALPATHXXXX"}
`})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, envOf(env))
	require.NotNil(t, ws)
	require.Empty(t, ws.Rejected, render(problems))

	assert.Equal(t, []string{env["WHOLE"], "/T000/B000/XXXXSECRETXXXX"}, ws.Server("whole").FromEnv)
	assert.Equal(t, []string{env["BASE"]}, ws.Server("base").FromEnv, "the path written in the config is not a secret")
	assert.Equal(t, []string{env["SPACED"]}, ws.Server("spaced").FromEnv)
	assert.Equal(t, []string{env["HOST"]}, ws.Server("literal").FromEnv, "no path is taken for a secret by its looks")

	secrets := ws.Secrets()
	assert.Contains(t, secrets, "/T000/B000/XXXXSECRETXXXX")
	assert.Contains(t, secrets, "two%20words/and%20slash", "as a URL's path shows it")
	for _, not := range []string{"/v1/mcp", "/T000/B000/LITERALPATHXXXX", "LITERALPATHXXXX"} {
		assert.NotContains(t, secrets, not)
	}
}

// TestHeaderSecretsIncludeTheCredential: a server that refuses a token quotes it
// without its scheme, so the credential of an Authorization header is a secret alone,
// and so are the user:password a Basic one encodes and its password.
func TestHeaderSecretsIncludeTheCredential(t *testing.T) {
	srv := &Server{Headers: map[string]string{
		"authorization":       "Bearer tok-3b8e61f0",
		"Proxy-Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("proxyuser:pw-9a2c7d")),
		"X-Title":             "My Agent",
	}}
	got := srv.HeaderSecrets()
	for _, want := range []string{"Bearer tok-3b8e61f0", "tok-3b8e61f0", "proxyuser:pw-9a2c7d", "pw-9a2c7d", "My Agent"} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "Agent", "only authorization headers have a scheme and a credential")
	assert.Nil(t, (&Server{}).HeaderSecrets())

	ws := &Workspace{Servers: []*Server{srv}}
	assert.Contains(t, ws.Secrets(), "tok-3b8e61f0")
}

// TestWithheldNamesOthersSecrets: each server learns which host variables the rest of
// the config reads for its secrets (another server's {env:} and ${VAR}, an http.auth
// token), less those it reads itself; an env_file's variables are not the host's.
func TestWithheldNamesOthersSecrets(t *testing.T) {
	env := map[string]string{"GH": "gh-token-1", "CI": "ci-token-0123456789", "SHARED": "shared-1", "DIR": "/srv"}
	dir := writeFiles(t, map[string]string{
		".env": "FROMFILE=file-1\n",
		"mcp.yaml": `version: 1
http:
  auth:
    tokens: {ci: {env: CI}}
servers:
  a:
    command: run
    env: {T: {env: GH}, S: '${SHARED}'}
    inherit_env: ['AWS_*']
  exact:
    command: run
    inherit_env: [GH]
  b:
    command: run
    env_file: .env
    args: ['${DIR}/x', '${FROMFILE}', '${SHARED}']
    inherit_env: true
`,
	})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, envOf(env))
	require.NotNil(t, ws, render(problems))
	a, b := ws.Server("a"), ws.Server("b")
	assert.ElementsMatch(t, []string{"GH", "SHARED"}, a.HostVars)
	assert.ElementsMatch(t, []string{"DIR", "SHARED"}, b.HostVars, "an env_file's variable is not the host's")
	assert.Equal(t, []string{"CI", "DIR"}, a.Withheld)
	assert.Equal(t, []string{"CI", "GH"}, b.Withheld, "what b reads itself is not withheld from it")
	assert.Empty(t, ws.Server("exact").Withheld, "a server that inherits by exact names alone withholds nothing")
}

// TestSecretOnTheCommandLineIsWarned: an argument that ${VAR} fills with a secret
// (a variable named like one) puts it in the server's command line, which every user
// of the machine can read; check says so and how to avoid it. A path is no secret.
func TestSecretOnTheCommandLineIsWarned(t *testing.T) {
	env := map[string]string{"GITHUB_TOKEN": "ghp-argv-1", "HOME": "/home/u", "EMPTY_TOKEN": ""}
	dir := writeFiles(t, map[string]string{"mcp.yaml": `version: 1
servers:
  gh:
    command: run
    args: ['--token', '${GITHUB_TOKEN}', '${HOME}/data', '${EMPTY_TOKEN:-none}', '$${NOT_A_TOKEN}']
`})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, envOf(env))
	require.NotNil(t, ws, render(problems))
	text := render(problems)
	assert.Contains(t, text, `server "gh": args[1]: ${GITHUB_TOKEN} puts a secret on the server's command line`)
	assert.Equal(t, 1, strings.Count(text, "command line"), "only the secret is warned about: %s", text)
	assert.NotContains(t, text, "ghp-argv-1")
	require.NotNil(t, ws.Server("gh"), "a warning, the server still runs")
}
