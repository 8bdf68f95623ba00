package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The retrieval benchmark: testdata/catalog.json holds the tools of public
// MCP servers as the aggregator exported them (see testdata/README.md), and
// testdata/queries.json requests in words, each with the tools that would
// satisfy it, written by reading the tools' descriptions.

// Targets of the benchmark (issue 16).
const (
	targetRecallAt1 = 0.75
	targetRecallAt5 = 0.95
	targetBuild5000 = 50 * time.Millisecond
	targetQuery     = time.Millisecond
)

// catalogTool is one tool of testdata/catalog.json.
type catalogTool struct {
	Name       string          `json:"name"`
	Server     string          `json:"server"`
	Original   string          `json:"original"`
	Definition json.RawMessage `json:"definition"`
}

// retrievalQuery is one request of testdata/queries.json.
type retrievalQuery struct {
	Query  string   `json:"query"`
	Accept []string `json:"accept"`
}

func loadCatalog(t testing.TB) []Tool {
	t.Helper()
	data, err := os.ReadFile("testdata/catalog.json")
	require.NoError(t, err)
	var file struct {
		Tools []catalogTool `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	tools := make([]Tool, len(file.Tools))
	for i, ct := range file.Tools {
		tools[i] = Tool{Name: ct.Name, Original: ct.Original, Server: ct.Server, Raw: ct.Definition}
	}
	return tools
}

func loadQueries(t testing.TB) []retrievalQuery {
	t.Helper()
	data, err := os.ReadFile("testdata/queries.json")
	require.NoError(t, err)
	var qs []retrievalQuery
	require.NoError(t, json.Unmarshal(data, &qs))
	return qs
}

// scaled repeats the catalog under fresh names until it holds n tools.
func scaled(tools []Tool, n int) []Tool {
	out := make([]Tool, 0, n)
	for copyN := 0; len(out) < n; copyN++ {
		for _, t := range tools {
			if len(out) == n {
				break
			}
			t.Name = fmt.Sprintf("%s_%d", t.Name, copyN)
			t.Server = fmt.Sprintf("%s%d", t.Server, copyN)
			out = append(out, t)
		}
	}
	return out
}

// retrieval is the outcome of running every query once.
type retrieval struct {
	at1, at5 float64
	misses   []string // queries whose best five hold no acceptable tool
	seconds  []string // queries answered in the top five, but not first
}

func runRetrieval(ix *Index, qs []retrievalQuery) retrieval {
	var r retrieval
	hit1, hit5 := 0, 0
	for _, q := range qs {
		hits := ix.Search(Query{Text: q.Query, Limit: 5})
		rank := -1
		for i, h := range hits {
			if slices.Contains(q.Accept, h.Tool.Name) {
				rank = i
				break
			}
		}
		got := names(hits)
		switch {
		case rank == 0:
			hit1++
			hit5++
		case rank > 0:
			hit5++
			r.seconds = append(r.seconds, fmt.Sprintf("%q: #%d, got %v", q.Query, rank+1, got))
		default:
			r.misses = append(r.misses, fmt.Sprintf("%q: want one of %v, got %v", q.Query, q.Accept, got))
		}
	}
	r.at1 = float64(hit1) / float64(len(qs))
	r.at5 = float64(hit5) / float64(len(qs))
	return r
}

// percentile returns the p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func TestRetrievalBenchmark(t *testing.T) {
	tools := loadCatalog(t)
	qs := loadQueries(t)
	require.GreaterOrEqual(t, len(tools), 250, "the benchmark needs at least 250 real tools")
	require.GreaterOrEqual(t, len(qs), 100, "the benchmark needs at least 100 queries")
	known := map[string]bool{}
	for _, tool := range tools {
		known[tool.Name] = true
	}
	for _, q := range qs {
		for _, a := range q.Accept {
			require.True(t, known[a], "query %q accepts %q, which is not in the catalog", q.Query, a)
		}
	}

	ix := Build(tools)
	r := runRetrieval(ix, qs)
	t.Logf("retrieval over %d tools, %d queries: recall@1 %.3f, recall@5 %.3f", len(tools), len(qs), r.at1, r.at5)
	if testing.Verbose() {
		t.Logf("found, but not first:\n  %s", strings.Join(r.seconds, "\n  "))
	}
	if len(r.misses) > 0 {
		t.Logf("not in the best five:\n  %s", strings.Join(r.misses, "\n  "))
	}
	assert.GreaterOrEqual(t, r.at1, targetRecallAt1, "recall@1")
	assert.GreaterOrEqual(t, r.at5, targetRecallAt5, "recall@5")

	if raceEnabled {
		t.Log("latency is not measured under the race detector")
		return
	}
	// Latency: every query against the catalog as it is and grown to 5,000
	// tools, and the index build of those 5,000.
	big := scaled(tools, 5000)
	start := time.Now()
	bigIx := Build(big)
	build := time.Since(start)
	var small, large []time.Duration
	for range 5 {
		for _, q := range qs {
			start := time.Now()
			ix.Search(Query{Text: q.Query, Limit: 5})
			small = append(small, time.Since(start))
			start = time.Now()
			bigIx.Search(Query{Text: q.Query, Limit: 5})
			large = append(large, time.Since(start))
		}
	}
	t.Logf("query latency, %d tools: median %s, p99 %s; 5,000 tools: median %s, p99 %s; build of 5,000 tools: %s",
		len(tools), percentile(small, 0.5), percentile(small, 0.99), percentile(large, 0.5), percentile(large, 0.99), build)
	// Latency is a figure to read, not to fail on: tests share the machine
	// with every other package's. These bounds catch only a change that
	// makes search or build many times slower; BenchmarkSearch and
	// BenchmarkBuild5000 give the figures.
	assert.Less(t, percentile(large, 0.5), 10*targetQuery, "median query over 5,000 tools")
	assert.Less(t, build, 100*targetBuild5000, "index build over 5,000 tools")
}

func BenchmarkBuild5000(b *testing.B) {
	tools := scaled(loadCatalog(b), 5000)
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		Build(tools)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkRebuild5000 is the index build after a reload that changed one
// server of twenty: the other servers' tools are reused as they were read.
func BenchmarkRebuild5000(b *testing.B) {
	tools := scaled(loadCatalog(b), 5000)
	prev := Build(tools)
	next := slices.Clone(tools)
	for i := range next {
		if i%20 == 0 {
			next[i].Raw = bytes.Replace(next[i].Raw, []byte(`"description":"`), []byte(`"description":"Now: `), 1)
		}
	}
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		Rebuild(prev, next)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

func BenchmarkSearch(b *testing.B) {
	tools := loadCatalog(b)
	qs := loadQueries(b)
	for _, size := range []int{len(tools), 5000} {
		ix := Build(scaled(tools, size))
		b.Run(fmt.Sprintf("tools=%d", size), func(b *testing.B) {
			i := 0
			for b.Loop() {
				ix.Search(Query{Text: qs[i%len(qs)].Query, Limit: 5})
				i++
			}
		})
	}
}

// cpuTime is the CPU time this process has used, for benchmarks on a
// shared machine where the wall clock also counts other people's work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
