package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConformanceLeasedAtDefaultCap runs the official conformance suite through the
// aggregator with mcp-go's conformance server as a leased upstream at the default
// lease settings, twice. The suite's client opens a session per scenario and never
// ends one, and a run takes a few seconds: the scenarios after the 16th that lease
// are refused for lease.max_instances, since no lease is 10 seconds quiet yet. Once
// the first run's sessions have been quiet that long, a second run reclaims each of
// their 16 leases, and is refused no more than the first was; without reclaiming, it
// was refused every lease.
func TestConformanceLeasedAtDefaultCap(t *testing.T) {
	requireSlow(t)
	t.Parallel()
	suite := newConformanceSuite(t)
	server := buildConformanceServer(t)
	url := startConformanceServer(t, server)
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  conformance:
    transport: streamable_http
    url: %s
    truely-stateless: false
`, quoted(url)))
	a.waitLoaded()

	run := func(n int) []string {
		start := time.Now()
		results := suite.runAll(t, a.url)
		require.NotEmpty(t, results)
		var refused []string
		for name, r := range results {
			if strings.Contains(strings.Join(r.problems, " "), "lease.max_instances") {
				refused = append(refused, name)
			}
		}
		sort.Strings(refused)
		t.Logf("run %d: %d scenarios in %s, %d refused for lease.max_instances %v, %d leases reclaimed so far",
			n, len(results), time.Since(start).Round(time.Millisecond), len(refused), refused, len(leaseEvents(a, "reclaimed", "conformance")))
		return refused
	}
	first := run(1)
	// The passing of the quiet time is what the second run waits for.
	time.Sleep(reclaimIdle)
	second := run(2)
	assert.LessOrEqual(t, len(second), len(first), "the second run was refused more than the first: %v", second)
	assert.Len(t, leaseEvents(a, "reclaimed", "conformance"), defaultLeaseCap, "each lease of the first run was reclaimed")
}
