package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// operatorViews starts the aggregator on the config file at path, with env added to
// its environment and to that of `tools`, waits until it has loaded, and returns, by
// the name a failed assertion gives it, each place an operator reads what its servers
// did: the log, mcp_status, the status page and /status.json, and the output of
// `tools` run on the same file with toolsFlags.
func operatorViews(t *testing.T, path string, env []string, toolsFlags ...string) map[string]string {
	t.Helper()
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}, env: env})
	a.waitLoaded()
	status := string(a.connect().callToolResult("mcp_status", map[string]any{}))
	_, _, page := opsGet(t, http.DefaultClient, opsBase(a)+"/status")
	_, _, statusJSON := opsGet(t, http.DefaultClient, opsBase(a)+"/status.json")
	tools := exec.Command(binary, append(append([]string{"tools"}, toolsFlags...), "--config", path)...)
	tools.Env = markerEnv(newMarker(), env...)
	out, _ := tools.CombinedOutput()
	return map[string]string{"the log": a.log.String(), "mcp_status": status, "/status": string(page),
		"/status.json": string(statusJSON), "`tools`": string(out)}
}

// shServer is the config of the stateless server name that runs script with
// sh -c, with the settings given, one a line, and 5s to start.
func shServer(name, script string, settings ...string) string {
	return serverYAML(name, append([]string{statelessServer, "command: sh", "args: [-c, '" + script + "']"}, append(settings, "connect_timeout: 5s")...)...)
}

// tokenEnv is the setting that gives a server the variable TOKEN.
func tokenEnv(token string) string { return "env: {TOKEN: " + quoted(token) + "}" }

// assertNotShown asserts that no secret, nor any part of one given, shows in any
// of the views.
func assertNotShown(t *testing.T, views map[string]string, secrets ...string) {
	t.Helper()
	for where, text := range views {
		for _, secret := range secrets {
			assert.NotContains(t, text, secret, "a secret reached %s", where)
		}
	}
}

// requireShown requires text in each of the views named in where.
func requireShown(t *testing.T, views map[string]string, text, why string, where ...string) {
	t.Helper()
	for _, w := range where {
		require.Contains(t, views[w], text, "%s: %s", w, why)
	}
}

// TestSecretsNeverLogged: an upstream that prints its token on stderr and
// fails, and a remote upstream whose URL carries a key, are reported in the
// log, in mcp_status and by `tools` without the secret ever appearing.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const token, key = "tok-7f3a9c2e-secret", "key-51b0d8e4-secret"
	config := "version: 1\nservers:\n" +
		shServer("leaky", `echo "my token is $TOKEN" >&2; exit 3`, tokenEnv(token)) + `  remote:
    truely-stateless: true
    url: "http://127.0.0.1:1/mcp?api_key=` + key + `"
    connect_timeout: 2s
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    tools: {whitelist: [echo]}
`
	views := operatorViews(t, writeConfig(t, config), nil, "--json")
	requireShown(t, views, "leaky", "the failing server is reported", "mcp_status", "`tools`")
	requireShown(t, views, "remote", "the failing server is reported", "mcp_status")
	requireShown(t, views, "my token is", "the upstream's stderr line is logged", "the log")
	assertNotShown(t, views, token, key)
	assert.Contains(t, views["the log"], "<redacted>", "secrets are replaced, not dropped silently")
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
	views := operatorViews(t, path, []string{"SEC3=" + pathSecret, "SECA=" + argSecret})
	requireShown(t, views, "h3", "the failing server is reported", "mcp_status")
	requireShown(t, views, "127.0.0.1:1", "the failed connection is reported", "`tools`", "the log")
	requireShown(t, views, "arg is", "the upstream's stderr line is logged", "the log")
	assertNotShown(t, views, pathSecret, argSecret, fileSecret)
}

// TestSecretURLPathFromAVariableNeverShown: a remote server's whole URL taken from a
// variable, with a key in its path and a password, is a secret whole, and so is the
// path alone: Go's HTTP client quotes a failed request's URL with the password
// starred, so the URL no longer shows whole, but the key in its path does not reach
// the log, mcp_status, the status page or `tools`.
func TestSecretURLPathFromAVariableNeverShown(t *testing.T) {
	t.Parallel()
	const pathKey = "XXXXSECRET6a04cf"
	config := `version: 1
servers:
  hook:
    truely-stateless: true
    url: "${HOOK_URL}"
    connect_timeout: 2s
`
	views := operatorViews(t, writeConfig(t, config), []string{"HOOK_URL=http://u:pw-0912@127.0.0.1:1/T000/B000/" + pathKey + "?x=1"}, "--json")
	requireShown(t, views, "127.0.0.1:1", "the failed connection is reported", "the log", "mcp_status", "/status.json", "`tools`")
	assertNotShown(t, views, pathKey)
}

// TestSecretURLUserNeverShown: the user name of a remote server's URL is a
// credential as much as its password (a key sent as the user, `https://KEY:@host`).
// Go's HTTP client quotes a failed request's URL with the password starred but the
// user name whole; neither reaches the log, mcp_status, the status page or `tools`.
func TestSecretURLUserNeverShown(t *testing.T) {
	t.Parallel()
	const user, keyAsUser = "usr-2f9c41d7-secret", "sk_live_8d03ae5b7c"
	config := `version: 1
servers:
  userpass:
    truely-stateless: true
    url: "http://` + user + `:pw-61e0@127.0.0.1:1/mcp"
    connect_timeout: 2s
  keyuser:
    truely-stateless: true
    url: "http://` + keyAsUser + `:@127.0.0.1:1/mcp"
    connect_timeout: 2s
`
	views := operatorViews(t, writeConfig(t, config), nil, "--json")
	requireShown(t, views, "127.0.0.1:1", "the failed connections are reported", "the log", "mcp_status", "/status.json", "`tools`")
	assertNotShown(t, views, user, keyAsUser)
}

// TestSecretsInLastWordsNeverShown: what a server that fails to start wrote last on
// stderr is quoted in its error, each line cut short. Neither a secret of its own that
// the cut splits nor one another server holds (here copied from the host by both, with
// inherit_env by one) shows in the log, mcp_status, the status page or `tools`.
func TestSecretsInLastWordsNeverShown(t *testing.T) {
	t.Parallel()
	const ownSecret, hostSecret = "cutsecret-0b5e72d9c4a1f8", "hostsecret-4d71c9e0a2"
	config := "version: 1\nservers:\n" +
		shServer("cut", `read x; printf "%0170d TOKEN=%s\n" 0 "$TOKEN" >&2; exit 3`, tokenEnv(ownSecret)) +
		shServer("other", `read x; echo "I was given $HOSTSEC" >&2; exit 3`, "inherit_env: [HOSTSEC]") + `  owner:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {KEY: {env: HOSTSEC}}
`
	views := operatorViews(t, writeConfig(t, config), []string{"HOSTSEC=" + hostSecret}, "--json")
	for _, said := range []string{"TOKEN=", "I was given"} {
		requireShown(t, views, said, "the last words of the server that failed are quoted", "the log", "mcp_status", "/status.json", "`tools`")
	}
	assertNotShown(t, views, ownSecret[:12], hostSecret)
}

// TestAuthorizationCredentialNeverShown: a remote server that refuses a token tends
// to quote it without its scheme ("invalid token X" for "Bearer X"), and the
// aggregator quotes the answer of a server that fails to start. The credential of a
// configured Authorization header (a Basic one decoded too) shows in neither the
// log, mcp_status nor `tools`.
func TestAuthorizationCredentialNeverShown(t *testing.T) {
	t.Parallel()
	const token, password = "bare-8c2f5e1a-token", "basicpw-71d4e0b9"
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		said := r.Header.Get("Authorization")
		if scheme, credential, ok := strings.Cut(said, " "); ok {
			said = credential
			if pair, err := base64.StdEncoding.DecodeString(credential); err == nil && scheme == "Basic" {
				said = string(pair)
			}
		}
		http.Error(w, "invalid credentials: "+said, http.StatusInternalServerError)
	}))
	t.Cleanup(refusing.Close)
	config := `version: 1
servers:
  bearer:
    truely-stateless: true
    url: "` + refusing.URL + `/mcp"
    headers: {Authorization: "Bearer ` + token + `"}
    connect_timeout: 3s
  basic:
    truely-stateless: true
    url: "` + refusing.URL + `/mcp"
    headers: {Authorization: "Basic ` + base64.StdEncoding.EncodeToString([]byte("agent:"+password)) + `"}
    connect_timeout: 3s
`
	views := operatorViews(t, writeConfig(t, config), nil, "--json")
	requireShown(t, views, "invalid credentials", "the refusal is quoted", "the log", "mcp_status", "`tools`")
	assertNotShown(t, views, token, password)
}

// TestSecretAtTheCutOfALongStderrLineNeverLogged: a stderr line longer than the log
// keeps is cut short; a secret that straddles the cut is not left half in the log.
func TestSecretAtTheCutOfALongStderrLineNeverLogged(t *testing.T) {
	t.Parallel()
	const secret = "longline-e0c4a9172b5d"
	a := serveConfig(t, httpTransport, "version: 1\nservers:\n"+
		shServer("long", `read x; printf "%065526d%s and more\n" 0 "$TOKEN" >&2; exit 3`, tokenEnv(secret)))
	line, ok := a.log.waitLine(func(line string) bool { return strings.Contains(line, "more bytes)") }, startTimeout, a.exited)
	require.True(t, ok, "the long line is logged, cut short:\n%s", a.log)
	assert.NotContains(t, line, secret[:8], "part of a secret reached the log")
	a.waitLoaded()
	assert.NotContains(t, a.log.String(), secret[:8], "part of a secret reached the log")
}

// TestOTLPHeaderValuesNeverLogged: the values of OTEL_EXPORTER_OTLP_HEADERS (a
// collector's API key) stay out of the log, also when a collector refuses the export
// with an answer that quotes the key: the failed export is logged with that answer.
func TestOTLPHeaderValuesNeverLogged(t *testing.T) {
	t.Parallel()
	const key, token = "otlpkey-5e0b93c1d7", "otlptok-2a6f84e9c0"
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown API key "+r.Header.Get("X-Api-Key")+" for "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	t.Cleanup(collector.Close)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, "version: 1\nservers:\n  demo:\n    truely-stateless: true\n    "+demoServer("tools")+"\n")},
		env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS=x-api-key=" + key + ",authorization=Bearer%20" + token, "OTEL_BSP_SCHEDULE_DELAY=50"},
	})
	a.waitLoaded()
	a.connect().callToolResult("mcp_status", map[string]any{})
	line, ok := a.log.waitLine(func(line string) bool { return strings.Contains(line, "traces could not be exported") }, startTimeout, a.exited)
	require.True(t, ok, "the refused export is logged:\n%s", a.log)
	require.Contains(t, line, "unknown API key", "the collector's answer is logged")
	for _, secret := range []string{key, token} {
		assert.NotContains(t, a.log.String(), secret, "an OTLP header value reached the log")
	}
}

// TestMultilineSecretNeverShown: a secret of several lines (a PEM key) that a server
// prints reaches stderr one line at a time, and each of its lines is a secret.
func TestMultilineSecretNeverShown(t *testing.T) {
	t.Parallel()
	const line1, line2 = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "mlsecret-line2-7e3f0a9b1c2d4e5f"
	config := `version: 1
servers:
  pem:
    truely-stateless: true
    command: sh
    args: [-c, 'read x; echo "bad key: $KEY" >&2; exit 3']
    env:
      KEY: |
        -----BEGIN PRIVATE KEY-----
        ` + line1 + `
        ` + line2 + `
        -----END PRIVATE KEY-----
    connect_timeout: 5s
`
	views := operatorViews(t, writeConfig(t, config), nil, "--json")
	requireShown(t, views, "bad key", "the server's stderr is logged", "the log")
	requireShown(t, views, "its last words on stderr", "what the server said is quoted", "the log", "mcp_status", "`tools`")
	assertNotShown(t, views, line1, line2)
}

// TestInheritedSecretNeverShown: a host variable a server inherits (inherit_env) whose
// name says it holds a secret, or whose value is a URL with a password, is a secret:
// the server printing it puts it in neither the log, mcp_status nor `tools`. Other
// inherited values (a region) are not secrets and stay readable.
func TestInheritedSecretNeverShown(t *testing.T) {
	t.Parallel()
	const key, dbPassword, region = "wJalrXUtnFEMI-5b1e09c2d7", "dbpw-0f6a2c91", "eu-central-1"
	config := "version: 1\nservers:\n" +
		shServer("inherits", `read x; echo "region $AWS_DEFAULT_REGION key $AWS_SECRET_ACCESS_KEY db $DATABASE_URL" >&2; exit 3`,
			"inherit_env: [AWS_*, DATABASE_URL]")
	views := operatorViews(t, writeConfig(t, config), []string{"AWS_SECRET_ACCESS_KEY=" + key, "AWS_DEFAULT_REGION=" + region,
		"DATABASE_URL=postgres://app:" + dbPassword + "@127.0.0.1:5432/app"}, "--json")
	requireShown(t, views, "region "+region+" key ", "what the server said is quoted, the region readable", "the log", "mcp_status", "`tools`")
	assertNotShown(t, views, key, dbPassword)
}

// TestInheritEverythingWithholdsOthersSecrets: `inherit_env: true` (or a * pattern)
// gives a server the host's variables, but not those the rest of the config reads
// for its secrets: another server's {env:} source, a gateway client's token, the
// OTLP exporter's headers. A server that names one exactly still gets it.
func TestInheritEverythingWithholdsOthersSecrets(t *testing.T) {
	t.Parallel()
	const ghToken, ciToken, otlpHeaders = "gh-token-7a0c5e19", "ci-bot-token-4e8b2d6f9a13", "x-api-key=otlp-key-3c9e"
	config := `version: 1
http:
  auth:
    tokens: {ci: {env: CI_BOT_TOKEN}}
servers:
  a:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {GH: {env: GH_TOKEN}}
    transform: [{prefix: a_}]
  everything:
    truely-stateless: true
    ` + demoServer("tools") + `
    inherit_env: true
    transform: [{prefix: all_}]
  named:
    truely-stateless: true
    ` + demoServer("tools") + `
    inherit_env: [GH_TOKEN, 'OTHER_*']
    transform: [{prefix: named_}]
`
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, config)},
		env: []string{"GH_TOKEN=" + ghToken, "CI_BOT_TOKEN=" + ciToken, "OTEL_EXPORTER_OTLP_HEADERS=" + otlpHeaders,
			"OTEL_SDK_DISABLED=true", "OTHER_VISIBLE=shown"}})
	a.waitLoaded()
	c := a.connectAs(ciToken)
	env := func(tool, name string) string {
		return firstText(t, c.callToolResult(tool, map[string]any{"name": name}))
	}
	assert.Equal(t, ghToken, env("a_env", "GH"), "the server that asked for the secret has it")
	assert.Empty(t, env("all_env", "GH_TOKEN"), "another server's secret does not come with inherit_env: true")
	assert.Empty(t, env("all_env", "CI_BOT_TOKEN"), "a gateway client's token does not come with inherit_env: true")
	assert.Empty(t, env("all_env", "OTEL_EXPORTER_OTLP_HEADERS"), "the exporter's credentials do not come with inherit_env: true")
	assert.Equal(t, "shown", env("all_env", "OTHER_VISIBLE"), "the rest of the host's variables do")
	assert.Equal(t, ghToken, env("named_env", "GH_TOKEN"), "named exactly, it is passed")
	assert.Equal(t, "shown", env("named_env", "OTHER_VISIBLE"))
}

// TestSecretAtTheCutOfAStdoutLineNeverLogged: a line a server writes to stdout that
// is not JSON-RPC (a banner) is logged by its start, cut short; a secret where the cut
// falls does not leave its first part in the log.
func TestSecretAtTheCutOfAStdoutLineNeverLogged(t *testing.T) {
	t.Parallel()
	const secret = "bnrsecret-6d2a0f93e1c7"
	a := serveConfig(t, httpTransport, "version: 1\nservers:\n"+
		shServer("banner", `printf "%0105d key=%s\n" 0 "$TOKEN"; read x; exit 3`, tokenEnv(secret)))
	line, ok := a.log.waitLine(func(line string) bool { return strings.Contains(line, "not JSON-RPC") }, startTimeout, a.exited)
	require.True(t, ok, "the banner is logged:\n%s", a.log)
	require.Contains(t, line, "key=", "the banner's start is logged")
	assert.NotContains(t, line, secret[:6], "part of a secret reached the log")
}

// TestSecretAtTheCutOfAnErrorBodyNeverShown: a remote server that fails a call with
// an HTTP error status is quoted by the start of its answer's body in the call's
// error; a token the body echoes where the cut falls does not leave its first part
// there, nor in the log.
func TestSecretAtTheCutOfAnErrorBodyNeverShown(t *testing.T) {
	t.Parallel()
	const token = "bodytok-93e1c7a05f2d8b"
	up := server.NewMCPServer("refuser", "1.0.0", server.WithToolCapabilities(true))
	addTextTool(up, "work", "Fails over HTTP.", "never")
	inner := server.NewStreamableHTTPServer(up)
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			_, credential, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			http.Error(w, strings.Repeat("x", 185)+" token="+credential+" is over its quota", http.StatusTooManyRequests)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(remote.Close)
	a := serveConfig(t, httpTransport, `version: 1
servers:
  quota:
    truely-stateless: true
    url: "`+remote.URL+`/mcp"
    headers: {Authorization: "Bearer `+token+`"}
`)
	a.waitLoaded()
	resp := a.connect().callTool("work", map[string]any{})
	require.NotEmpty(t, resp.Error, "the call fails with the HTTP status")
	var rpcErr struct{ Message string }
	require.NoError(t, json.Unmarshal(resp.Error, &rpcErr))
	msg := rpcErr.Message
	require.Contains(t, msg, "HTTP status 429", "the error names the status")
	require.Contains(t, msg, "token=", "the error quotes the body's start")
	assert.NotContains(t, msg, token[:8], "part of a token reached the client")
	assert.NotContains(t, a.log.String(), token[:8], "part of a token reached the log")
}
