package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpsStopWhileAServerStartsLogsNoError: SIGTERM while a server is still starting
// (it never answers initialize) gives its start up, and that is no error: an operator
// who alerts on ERROR lines is not paged by a rolling restart. The first load (where
// the server is required) and a reload each log that the start was abandoned, at
// INFO, and the gateway exits 0 leaving no process (stop checks both).
func TestOpsStopWhileAServerStartsLogsNoError(t *testing.T) {
	t.Parallel()
	hung := `
  hung:
    required: true
    truely-stateless: true
    command: sh
    args: ["-c", ` + quoted("echo starting >&2; exec "+binary+" demo-server misbehave hang-init") + `]
    connect_timeout: 10m
`
	waitStarting := func(t *testing.T, a *aggregator) {
		t.Helper()
		_, ok := a.log.waitLine(func(line string) bool {
			return strings.Contains(line, `msg="upstream stderr"`) && strings.Contains(line, "server=hung") && strings.Contains(line, "starting")
		}, startTimeout, a.exited)
		require.True(t, ok, "the server never started; stderr:\n%s", a.log)
	}
	check := func(t *testing.T, a *aggregator) {
		t.Helper()
		a.stop()
		assert.True(t, a.log.containsLine(`msg="server start abandoned: stopping"`, "server=hung"), "%s", a.log)
		for _, line := range strings.Split(a.log.String(), "\n") {
			assert.NotContains(t, line, "level=ERROR", "a stop signal is not an error")
		}
	}
	t.Run("first load", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, demoToolsConfig()+hung)
		waitStarting(t, a)
		check(t, a)
	})
	t.Run("reload", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, demoToolsConfig())
		a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}})
		a.waitLoaded()
		require.NoError(t, os.WriteFile(path, []byte(demoToolsConfig()+strings.Replace(hung, "required: true", "required: false", 1)), 0o644))
		waitStarting(t, a)
		check(t, a)
	})
}
