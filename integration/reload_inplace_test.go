package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadInPlaceWriteAppliedOnceWhole: a tool writes the config in
// place, in two parts, and the first part alone is a valid config that
// lacks the counter server. The second part is written only once the
// aggregator has looked at the first (its log says it waits for the file
// to settle). The edit is applied once, whole: the counter keeps its
// process and the client hears one tools/list_changed.
func TestReloadInPlaceWriteAppliedOnceWhole(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("echo, pid", counterBlock("one"))
		head, tail := reloadConfig("echo, pid, add"), counterBlock("one")
		whole := head + tail
		require.Equal(t, reloadConfig("echo, pid, add", counterBlock("one")), whole)
		path := writeConfig(t, base)
		// The settle period only has to outlast the test's answer to the log line.
		a := startAggregator(t, tr, aggregatorOptions{configs: []string{path}, flags: []string{"--reload-settle", "2s"}})
		a.waitLoaded()
		c := a.connect()
		if tr == httpTransport {
			listen(t, a, c)
		}
		r := &reloadRig{t: t, a: a, c: c, path: path}
		counterPID := r.pid("c_pid")

		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteString(head)
		require.NoError(t, err)
		line, ok := a.log.waitLine(func(line string) bool {
			return strings.Contains(line, "written in place") || strings.Contains(line, `msg="reload done"`)
		}, reloadWait, a.exited)
		require.True(t, ok, "the write in place was not seen; stderr:\n%s", a.log)
		require.NotContains(t, line, "reload done", "the half-written config was loaded; stderr:\n%s", a.log)
		_, err = f.WriteString(tail)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		assert.Contains(t, r.waitReload(), "changed=true")
		r.expectNotified(1)
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "pid", "add", "c_get", "c_increment", "c_pid"}, r.names())
		assert.Equal(t, counterPID, r.pid("c_pid"), "the server the first part left out was stopped")
		r.settle(whole)
		assert.Equal(t, 2, strings.Count(a.log.String(), `msg="reload done"`), "the edit and the identical rewrite, and nothing else, reloaded")
		assert.Equal(t, 1, r.listChanged())
	})
}

// TestReloadInPlaceInvalidConfigRejected: a config written in place that is
// invalid is reported as soon as it has settled, and the running config
// stays.
func TestReloadInPlaceInvalidConfigRejected(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("echo, pid")
		r := newReloadRig(t, tr, base)
		pid := r.pid("pid")
		require.NoError(t, os.WriteFile(r.path, []byte("version: 1\nservers: [this is: not: valid\n"), 0o644))
		assert.Contains(t, r.waitReload(), "changed=false")
		assert.True(t, r.a.log.containsLine("config rejected; keeping the last good config"))
		assert.True(t, r.a.log.containsLine("invalid YAML"), "the rejection says why")
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "pid"}, r.names())
		assert.Equal(t, pid, r.pid("pid"))
		r.settle(base)
		assert.Zero(t, r.listChanged(), "a rejected config must not notify")
	})
}
