package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A shutdown while a reload is still starting a server does not wait for
// that server's connect_timeout: the start is abandoned, its process stopped,
// and the aggregator exits within its shutdown grace (stop asserts the exit
// and that no process survived).
func TestShutdownDuringReloadAbandonsStarts(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		first := "version: 1\nservers:\n  demo:\n    " + demoServer("tools") + "\n"
		path := writeConfig(t, first)
		a := startAggregator(t, tr, aggregatorOptions{configs: []string{path}})
		a.waitLoaded()
		r := &reloadRig{t: t, a: a, path: path}
		// The new server says it started, then never answers initialize.
		hang := "exec " + binary + " demo-server misbehave hang-init"
		r.save(first + `  hang:
    command: sh
    args: ["-c", ` + quoted("echo started >&2; "+hang) + `]
    connect_timeout: 10m
`)
		_, ok := r.a.log.waitLine(func(line string) bool {
			return strings.Contains(line, `msg="upstream stderr"`) && strings.Contains(line, "server=hang") && strings.Contains(line, "started")
		}, startTimeout, r.a.exited)
		require.True(t, ok, "the new server never started; stderr:\n%s", r.a.log)
		r.a.stop()
	})
}
