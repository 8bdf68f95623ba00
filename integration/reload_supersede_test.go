package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadNotHeldBackByHangingStart: the operator adds a server that
// never answers initialize (with a generous connect_timeout), sees it, and
// removes it again while changing another server. The second edit takes
// effect at once: the start it no longer wants is abandoned, and its
// process stopped (the harness finds none left), instead of every later
// edit waiting out the connect_timeout.
func TestReloadNotHeldBackByHangingStart(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		r := newReloadRig(t, tr, reloadConfig("echo"))
		r.save(reloadConfig("echo", `  stuck:
    command: sh
    args: [-c, 'echo stuck-started >&2; exec sleep 600']
    connect_timeout: 10m
`))
		_, ok := r.a.log.waitLine(func(line string) bool { return containsAll(line, "upstream stderr", "stuck-started") }, reloadWait, r.a.exited)
		require.True(t, ok, "the hanging server never started; stderr:\n%s", r.a.log)

		next := reloadConfig("echo, add")
		r.save(next)
		_, ok = r.a.log.waitLine(func(line string) bool { return containsAll(line, `msg="reload done"`, "changed=true") }, reloadWait, r.a.exited)
		require.True(t, ok, "the newer config was not applied while the removed server hung; stderr:\n%s", r.a.log)
		r.expectNotified(1)
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "add"}, r.names())
		assert.True(t, r.a.log.containsLine("server start abandoned", "stuck"))
		r.seen = strings.Count(r.a.log.String(), `msg="reload done"`)
		r.settle(next)
		assert.Equal(t, 1, r.listChanged())
	})
}

// TestFirstLoadNotHeldBackByHangingStart: the gateway starts with a server
// that never answers initialize. The operator removes it from the config
// while the first load still waits for it: the edit is applied at once,
// not after the connect_timeout, and clients get the servers that work.
func TestFirstLoadNotHeldBackByHangingStart(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		path := writeConfig(t, reloadConfig("echo", `  stuck:
    command: sh
    args: [-c, 'echo stuck-started >&2; exec sleep 600']
    connect_timeout: 10m
`))
		a := startAggregator(t, tr, aggregatorOptions{configs: []string{path}})
		_, ok := a.log.waitLine(func(line string) bool { return containsAll(line, "upstream stderr", "stuck-started") }, reloadWait, a.exited)
		require.True(t, ok, "the hanging server never started; stderr:\n%s", a.log)

		r := &reloadRig{t: t, a: a, path: path}
		r.save(reloadConfig("echo, add"))
		_, ok = a.log.waitLine(func(line string) bool { return containsAll(line, `msg="reload done"`, "changed=true") }, reloadWait, a.exited)
		require.True(t, ok, "the edit was not applied while the first load waited for the removed server; stderr:\n%s", a.log)
		assert.True(t, a.log.containsLine("server start abandoned", "stuck"))
		a.waitLoaded()
		c := a.connect()
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "add"}, toolNames(t, c.listTools()))
	})
}
