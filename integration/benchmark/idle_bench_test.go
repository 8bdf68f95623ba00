package benchmark

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idleSampleEvery is the time between two samples of BenchmarkIdle.
const idleSampleEvery = 100 * time.Millisecond

// BenchmarkIdle measures the memory of an idle aggregator: `serve --http` with one stdio
// upstream (the echo helper), after one call and after idleBusyCalls once it has found
// itself idle (internal/memtrim), and its reaper (the second process of the
// same binary that kills the upstreams' process groups if the server dies). Each op is one
// sample of both processes, idleSampleEvery apart; the figures are the largest of the run:
// server-rss-KiB, reaper-rss-KiB and total-rss-KiB (VmRSS), and of each process the part
// that is its own memory (-anon-KiB: heap, stacks, runtime) rather than pages of the
// binary's file, which the kernel shares between the two processes and with the page
// cache (-file-KiB). total-pss-KiB counts each shared page once, split between the
// processes that map it. Recommended: -benchtime=20x.
func BenchmarkIdle(b *testing.B) {
	for _, calls := range []int{1, idleBusyCalls} {
		b.Run(fmt.Sprintf("after=%d-calls", calls), func(b *testing.B) { measureIdle(b, calls) })
	}
}

// idleBusyCalls is how many calls the second run of BenchmarkIdle makes before it
// samples, 16 in flight: enough for the collector to have run and every path of a call
// to have been taken.
const idleBusyCalls = 20000

// measureIdle starts the aggregator, makes calls, then samples it and its reaper.
func measureIdle(b *testing.B, calls int) {
	a := startHTTPAggregator(b, writeConfig(b, renderConfig(echoUpstream(b, "echo"))))
	c := dialHTTP(b, newHTTPClient(), a.url)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	params := callParams("echo", echoText)
	if err := c.checkEcho(ctx, params, echoText); err != nil {
		b.Fatal(err)
	}
	if calls > 1 {
		if _, err := sendRequests(c, calls-1, 16, "tools/call", params); err != nil {
			b.Fatal(err)
		}
	}
	server := a.cmd.Process.Pid
	reaper, err := childRunning(server, "_reaper")
	if err != nil {
		b.Fatal(err)
	}
	if calls > 1 {
		waitTrimmed(b, server)
	}
	var most struct{ server, reaper, total memUse }
	tick := time.NewTicker(idleSampleEvery)
	defer tick.Stop()
	b.ResetTimer()
	for range b.N {
		<-tick.C
		s, err := readMemUse(server)
		if err != nil {
			b.Fatal(err)
		}
		r, err := readMemUse(reaper)
		if err != nil {
			b.Fatal(err)
		}
		most.server, most.reaper = most.server.max(s), most.reaper.max(r)
		most.total = most.total.max(s.add(r))
	}
	b.StopTimer()
	for _, p := range []struct {
		name string
		m    memUse
	}{{"server", most.server}, {"reaper", most.reaper}, {"total", most.total}} {
		b.ReportMetric(float64(p.m.rss), p.name+"-rss-KiB")
		b.ReportMetric(float64(p.m.anon), p.name+"-anon-KiB")
		b.ReportMetric(float64(p.m.file), p.name+"-file-KiB")
	}
	b.ReportMetric(float64(most.total.pss), "total-pss-KiB")
}

// trimWait bounds the wait for an aggregator that fell idle to give memory back: it
// looks at its CPU time every 10 s (memtrim.IdleCheck) and trims after the first quiet
// period.
const trimWait = 45 * time.Second

// waitTrimmed waits until the aggregator's resident set falls by a quarter after traffic
// stopped, which it does once it finds itself idle; after trimWait it goes on, and the
// figures say what it holds.
func waitTrimmed(b *testing.B, pid int) {
	busy, err := readMemUse(pid)
	if err != nil {
		b.Fatal(err)
	}
	tick := time.NewTicker(idleSampleEvery)
	defer tick.Stop()
	deadline := time.After(trimWait)
	for {
		select {
		case <-deadline:
			b.Logf("the aggregator's resident set stayed at %d KiB or more for %s after the calls", busy.rss*3/4, trimWait)
			return
		case <-tick.C:
		}
		m, err := readMemUse(pid)
		if err != nil {
			b.Fatal(err)
		}
		if m.rss < busy.rss*3/4 {
			return
		}
	}
}

// memUse is what /proc/PID/smaps_rollup says of a process's memory, in KiB.
type memUse struct{ rss, pss, anon, file int64 }

func (m memUse) add(o memUse) memUse {
	return memUse{m.rss + o.rss, m.pss + o.pss, m.anon + o.anon, m.file + o.file}
}

func (m memUse) max(o memUse) memUse {
	return memUse{max(m.rss, o.rss), max(m.pss, o.pss), max(m.anon, o.anon), max(m.file, o.file)}
}

func readMemUse(pid int) (memUse, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return memUse{}, err
	}
	return parseSmapsRollup(data)
}

// parseSmapsRollup reads Rss, Pss and Anonymous of a /proc/PID/smaps_rollup file; file
// is what of the resident set is not anonymous.
func parseSmapsRollup(data []byte) (memUse, error) {
	var m memUse
	seen := 0
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) != 3 || string(f[2]) != "kB" {
			continue
		}
		n, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return memUse{}, fmt.Errorf("smaps_rollup: %q: %w", s.Text(), err)
		}
		switch string(f[0]) {
		case "Rss:":
			m.rss, seen = n, seen+1
		case "Pss:":
			m.pss, seen = n, seen+1
		case "Anonymous:":
			m.anon, seen = n, seen+1
		}
	}
	if seen != 3 {
		return memUse{}, fmt.Errorf("smaps_rollup: no Rss, Pss or Anonymous line")
	}
	m.file = m.rss - m.anon
	return m, nil
}

func TestParseSmapsRollup(t *testing.T) {
	m, err := parseSmapsRollup([]byte("00400000-7ffc1 ---p 00000000 00:00 0 [rollup]\nRss:  19584 kB\nPss:  18339 kB\nPss_Anon:  4304 kB\nAnonymous:  4304 kB\nSwap:  0 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, memUse{rss: 19584, pss: 18339, anon: 4304, file: 15280}, m)
	_, err = parseSmapsRollup([]byte("Rss: 1 kB\n"))
	assert.Error(t, err)
}
