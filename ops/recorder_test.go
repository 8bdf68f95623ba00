package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

func TestRecorderCountsPerEntryAndOutcome(t *testing.T) {
	rec := NewRecorder(5)
	a := &catalog.Entry{Server: "github", Exported: "gh_search", Original: "search"}
	b := &catalog.Entry{Server: "github", Exported: "gh_issue", Original: "issue"}
	for range 3 {
		rec.ToolCalled(a, proxy.CallOK, 20*time.Millisecond)
	}
	rec.ToolCalled(a, proxy.CallTimeout, 2*time.Second)
	rec.ToolCalled(b, proxy.CallToolError, time.Millisecond)
	rec.ToolCalled(nil, proxy.CallError, time.Microsecond)

	assert.Equal(t, 3.0, testutil.ToFloat64(rec.calls.WithLabelValues("github", "gh_search", "ok")))
	assert.Equal(t, 1.0, testutil.ToFloat64(rec.calls.WithLabelValues("github", "gh_search", "timeout")))
	assert.Equal(t, 1.0, testutil.ToFloat64(rec.calls.WithLabelValues("github", "gh_issue", "tool_error")))
	assert.Equal(t, 1.0, testutil.ToFloat64(rec.calls.WithLabelValues(unknownServer, unknownTool, "error")))
	// Outcomes that never happened export no series.
	assert.Equal(t, 4, testutil.CollectAndCount(rec.calls))

	assert.Equal(t, 2, testutil.CollectAndCount(rec.durations), "one histogram per server label")
}

func TestRecorderCallPathDoesNotAllocate(t *testing.T) {
	rec := NewRecorder(5)
	e := &catalog.Entry{Server: "s", Exported: "t"}
	rec.ToolCalled(e, proxy.CallOK, time.Millisecond) // resolves the series
	allocs := testing.AllocsPerRun(1000, func() { rec.ToolCalled(e, proxy.CallOK, time.Millisecond) })
	assert.Zero(t, allocs)
}

func BenchmarkRecorderToolCalled(b *testing.B) {
	rec := NewRecorder(5)
	e := &catalog.Entry{Server: "s", Exported: "t"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec.ToolCalled(e, proxy.CallOK, time.Millisecond)
		}
	})
}

func TestRecorderPrunesToolsTheCatalogDropped(t *testing.T) {
	r := newRig(t)
	r.load(t, demoConfig(""))
	cat := r.proxy.Catalog()
	echo, ok := cat.Lookup("echo")
	require.True(t, ok, "the demo tools server exports echo")
	gone := &catalog.Entry{Server: "removed", Exported: "old_tool"}
	r.rec.ToolCalled(echo, proxy.CallOK, time.Millisecond)
	r.rec.ToolCalled(gone, proxy.CallOK, time.Millisecond)
	r.rec.ToolCalled(nil, proxy.CallError, time.Millisecond)
	require.Equal(t, 3, testutil.CollectAndCount(r.rec.calls))

	r.rec.sync(cat, nil)
	assert.Equal(t, 2, testutil.CollectAndCount(r.rec.calls), "the dropped tool's series is gone, the catalog's and _unknown stay")
	assert.Equal(t, 1.0, testutil.ToFloat64(r.rec.calls.WithLabelValues("tools", "echo", "ok")))
	assert.Equal(t, 2, testutil.CollectAndCount(r.rec.durations), "servers: tools and _unknown")

	// A call still in flight on the dropped tool as it went is counted
	// again: its entry no longer carries the series that was pruned.
	r.rec.ToolCalled(gone, proxy.CallOK, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(r.rec.calls.WithLabelValues("removed", "old_tool", "ok")))
	assert.Equal(t, 3, testutil.CollectAndCount(r.rec.calls))
}

// Two recorders counting the same entries each count their own: the one
// whose series the entry does not carry finds its own in its table.
func TestRecordersShareEntries(t *testing.T) {
	a, b := NewRecorder(1), NewRecorder(1)
	e := &catalog.Entry{Server: "s", Exported: "t"}
	for range 3 {
		a.ToolCalled(e, proxy.CallOK, time.Millisecond)
		b.ToolCalled(e, proxy.CallToolError, time.Millisecond)
	}
	assert.Equal(t, 3.0, testutil.ToFloat64(a.calls.WithLabelValues("s", "t", "ok")))
	assert.Equal(t, 3.0, testutil.ToFloat64(b.calls.WithLabelValues("s", "t", "tool_error")))
	assert.Equal(t, 1, testutil.CollectAndCount(a.calls))
	assert.Equal(t, 1, testutil.CollectAndCount(b.calls))
}

func TestRecorderRestartsAndReloads(t *testing.T) {
	rec := NewRecorder(2)
	for _, kind := range []string{"lost", "restarted", "leased", "recycled", "spawn-failed", "reclaimed"} {
		rec.InstanceEvent("a", kind)
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(rec.restarts.WithLabelValues("a")))
	assert.Equal(t, 1.0, testutil.ToFloat64(rec.crashes.WithLabelValues("a")))
	assert.Equal(t, 1.0, testutil.ToFloat64(rec.reclaims.WithLabelValues("a")))

	for i, outcome := range []string{proxy.ReloadOK, proxy.ReloadPartial, proxy.ReloadRejected} {
		rec.Reloaded(proxy.Reload{Outcome: outcome, Version: uint64(i)})
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(rec.reloads.WithLabelValues(proxy.ReloadRejected)))
	kept := rec.Reloads()
	require.Len(t, kept, 2, "the ring keeps the last two")
	assert.Equal(t, []uint64{2, 1}, []uint64{kept[0].Version, kept[1].Version}, "newest first")
}

func TestReloadRingOrder(t *testing.T) {
	g := reloadRing{keep: 3}
	var got []string
	for i := range 7 {
		g.add(proxy.Reload{Version: uint64(i)})
		got = got[:0]
		for _, r := range g.list() {
			got = append(got, string(rune('0'+r.Version)))
		}
		wantLen := min(i+1, 3)
		require.Len(t, got, wantLen)
		var want []string
		for v := i; v > i-wantLen; v-- {
			want = append(want, string(rune('0'+v)))
		}
		assert.Equal(t, strings.Join(want, ""), strings.Join(got, ""))
	}
}

// TestRecorderHoldsNoReplacedEntriesWithoutScrapes: every reload or re-list
// that replaces a server's tools makes new catalog entries; a gateway that
// nobody scrapes must not keep the old ones (and all they point to) for
// ever. The label series stay what the catalog exports.
func TestRecorderHoldsNoReplacedEntriesWithoutScrapes(t *testing.T) {
	r := newRig(t)
	r.load(t, demoConfig(""))
	echo, ok := r.proxy.Catalog().Lookup("echo")
	require.True(t, ok, "the demo tools server exports echo")
	r.rec.ToolCalled(echo, proxy.CallOK, time.Millisecond)
	for range 10 * minPruneAt {
		// What a reload that changes the server leaves behind: an entry of
		// the same tool the catalog no longer holds.
		old := &catalog.Entry{Server: "tools", Exported: "echo", Original: "echo"}
		r.rec.ToolCalled(old, proxy.CallOK, time.Millisecond)
	}
	held := 0
	r.rec.series.Range(func(any, any) bool { held++; return true })
	assert.LessOrEqual(t, held, 2*minPruneAt, "series held for entries")
	_, stillHeld := r.rec.series.Load(echo)
	assert.True(t, stillHeld, "the catalog's own entry keeps its series")
	assert.Equal(t, 1, testutil.CollectAndCount(r.rec.calls), "one label series: tools/echo/ok")
}
