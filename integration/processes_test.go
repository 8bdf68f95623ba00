package integration

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The survivor check after every test covers the ordinary ways an aggregator ends.
// These tests add the hard ones: an aggregator killed outright, and upstreams that
// ignore both stdin EOF and SIGTERM and leave a grandchild behind.

// TestUpstreamsDieWithKilledAggregator SIGKILLs the aggregator: its upstreams, which
// it never gets to close, must die with it.
func TestUpstreamsDieWithKilledAggregator(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		serverEntry("demo", "demo_", statelessServer, demoServer("tools"))+
		serverEntry("counter", "counter_", demoServer("counter")))
	a.waitLoaded()
	c := a.connect()
	requireMarked(t, a.marker, pidOf(t, c, "demo_pid"))
	requireMarked(t, a.marker, pidOf(t, c, "counter_pid")) // a leased instance
	a.kill()
	// stop (at cleanup) waits for every upstream to be gone.
}

// ignoreTermLine is what the ignore-term demo server writes to stderr on start.
var ignoreTermLine = regexp.MustCompile(`pid (\d+) child (\d+)`)

// TestStubbornUpstreamIsKilled serves an upstream that ignores stdin EOF and SIGTERM and
// starts a grandchild that ignores SIGTERM too; stopping the aggregator must still end
// them all.
func TestStubbornUpstreamIsKilled(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, `version: 1
servers:
  stubborn:
    truely-stateless: true
    `+demoServer("misbehave", "ignore-term")+`
  demo:
    truely-stateless: true
    `+demoServer("tools")+`
    transform: [{prefix: demo_}]
`)
		a.waitLoaded()
		c := a.connect()
		assert.Equal(t, "pong", firstText(t, c.callToolResult("ping_tool", map[string]any{})))

		line, ok := a.log.waitLine(ignoreTermLine.MatchString, startTimeout, a.exited)
		require.True(t, ok, "the stubborn server's stderr did not reach the aggregator's log")
		m := ignoreTermLine.FindStringSubmatch(line)
		server, _ := strconv.Atoi(m[1])
		grandchild, _ := strconv.Atoi(m[2])
		requireMarked(t, a.marker, server)
		requireMarked(t, a.marker, grandchild)
		// stop (at cleanup) asserts that neither outlives the aggregator.
	})
}
