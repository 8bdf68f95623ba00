package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Host variables the isolation tests put in the aggregator's environment.
const (
	onbHostSecret = "onboarding-host-secret-0123456789"
	onbAWSSecret  = "onboarding-aws-secret-abcdefghij"
)

// TestOnboardingEnvIsolation: a stdio upstream sees a safe base of the host's
// environment and its own env, nothing else: a host secret one server copies reaches
// that server only, and inherit_env widens one server's view alone.
func TestOnboardingEnvIsolation(t *testing.T) {
	t.Parallel()
	config := `version: 1
servers:
  a:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {TOKEN: {env: ONB_HOST_SECRET}}
    transform: [{prefix: a_}]
  b:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {B_OWN: b-value}
    transform: [{prefix: b_}]
  c:
    truely-stateless: true
    ` + demoServer("tools") + `
    inherit_env: [AWS_*]
    transform: [{prefix: c_}]
`
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{writeConfig(t, config)},
		env: []string{"ONB_HOST_SECRET=" + onbHostSecret, "AWS_SECRET_ACCESS_KEY=" + onbAWSSecret, "LANG=C.UTF-8"}})
	c := a.connect()
	a.waitLoaded()
	env := func(tool, name string) string {
		return firstText(t, c.callToolResult(tool, map[string]any{"name": name}))
	}
	assert.Equal(t, onbHostSecret, env("a_env", "TOKEN"), "the server that asked for the secret has it")
	assert.Empty(t, env("a_env", "ONB_HOST_SECRET"), "the host variable itself is not passed on")
	assert.Empty(t, env("a_env", "AWS_SECRET_ACCESS_KEY"))
	assert.Empty(t, env("a_env", "B_OWN"), "another server's env never reaches this one")
	assert.Empty(t, env("b_env", "TOKEN"), "another server's env never reaches this one")
	assert.Empty(t, env("b_env", "ONB_HOST_SECRET"))
	assert.Empty(t, env("b_env", "AWS_SECRET_ACCESS_KEY"))
	assert.Equal(t, "b-value", env("b_env", "B_OWN"))
	assert.Equal(t, onbAWSSecret, env("c_env", "AWS_SECRET_ACCESS_KEY"), "inherit_env widens c's view")
	assert.Empty(t, env("c_env", "ONB_HOST_SECRET"))
	for _, tool := range []string{"a_env", "b_env", "c_env"} {
		assert.NotEmpty(t, env(tool, "PATH"), "the safe base")
		assert.Equal(t, "C.UTF-8", env(tool, "LANG"), "the safe base")
	}
	assert.NotContains(t, a.log.String(), onbHostSecret)
}

// TestOnboardingScrubsEverySecret: a server that prints its whole environment to stderr
// (it inherits everything, and names the variable another server reads its secret
// from, which * alone would not bring) cannot put that secret into the log: every log
// line is scrubbed of every secret the config holds.
func TestOnboardingScrubsEverySecret(t *testing.T) {
	t.Parallel()
	config := `version: 1
servers:
  holder:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {TOKEN: {env: ONB_HOST_SECRET}}
    transform: [{prefix: holder_}]
  leaky:
    truely-stateless: true
    inherit_env: ['*', ONB_HOST_SECRET]
    command: sh
    args: ['-c', 'env >&2; exec "$0" demo-server tools', ` + quoted(binary) + `]
    transform: [{prefix: leaky_}]
`
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{writeConfig(t, config)},
		env: []string{"ONB_HOST_SECRET=" + onbHostSecret}})
	a.connect()
	a.waitLoaded()
	line, ok := a.log.waitLine(func(line string) bool {
		return strings.Contains(line, "ONB_HOST_SECRET=")
	}, startTimeout, a.exited)
	require.True(t, ok, "the leaky server's environment never reached the log:\n%s", a.log)
	assert.Contains(t, line, "ONB_HOST_SECRET=<redacted>")
	assert.Contains(t, line, `server=leaky`)
	assert.NotContains(t, a.log.String(), onbHostSecret)
}

// TestOnboardingDemoEnv: the built-in demo's env tool reports only what the demo config
// sets, never a host variable, whatever a client asks.
func TestOnboardingDemoEnv(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, stdioTransport, aggregatorOptions{env: []string{"AWS_SECRET_ACCESS_KEY=" + onbAWSSecret}})
	c := a.connect()
	a.waitLoaded()
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "HOME", "PATH"} {
		result := c.callToolResult("demo_env", map[string]any{"name": name})
		var res struct {
			IsError bool `json:"isError"`
		}
		require.NoError(t, json.Unmarshal(result, &res))
		assert.True(t, res.IsError, "%s: a variable the demo config does not set is refused: %s", name, result)
		assert.NotContains(t, string(result), onbAWSSecret)
	}
	assert.Equal(t, "hello from the built-in demo config", firstText(t, c.callToolResult("demo_env", map[string]any{"name": "DEMO_GREETING"})))
}
