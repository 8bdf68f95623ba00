package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// marshalLine is the line as encoding/json writes the Record.
func marshalLine(t testing.TB, r *Record) []byte {
	line, err := json.Marshal(r)
	require.NoError(t, err)
	return append(line, '\n')
}

func fullRecord() Record {
	return Record{Time: time.Date(2026, 11, 29, 8, 9, 0, 100_000_000, time.UTC), Event: "tools/call",
		Principal: Principal{Kind: "subject", Issuer: "https://id.example.com", Subject: "alice", Client: "shared-app"},
		Session:   "4ecbe0203287", View: "readonly", Method: "tools/call", Server: "github", Tool: "github_create_issue",
		Original: "create_issue", ArgsSHA256: strings.Repeat("9f", 32), Args: json.RawMessage(`{"title":"a \u003cb\u003e","token":"[redacted]"}`),
		Outcome: Approved, Rule: "ask-before-writing", DurationMS: 182.4, BytesIn: 64, BytesOut: 311, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
}

// TestAppendLineIsJSONMarshal: the encoder writes, byte for byte, what
// encoding/json writes for the same Record.
func TestAppendLineIsJSONMarshal(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnew\nline\rcr\bbs\fff",
		"\x00\x01\x1f\x7f", "é ü 世界 🎉", "bad \xff\xfe utf8", "sep \u2028 and \u2029", "mixed\x00<é>\xc3"}
	floats := []float64{0, 0.001, 182.4, 1e-7, 1.5e-9, 123456789.123, 1e21, 1e20, -3.25, 0.000001, math.SmallestNonzeroFloat64}
	base := fullRecord()
	cases := []Record{{}, base, {Time: time.Unix(0, 0).UTC(), Event: "login", Method: "login", Outcome: OK, Principal: Principal{Kind: "client", Client: "alice"}}}
	for i, s := range strs {
		r := base
		r.Event, r.Principal.Subject, r.Session, r.View, r.Tool, r.Rule, r.TraceID = s, s, s, s, s, s, s
		r.DurationMS = floats[i%len(floats)]
		r.Time = time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.FixedZone("x", 3600*i))
		cases = append(cases, r)
	}
	for _, f := range floats {
		r := base
		r.DurationMS = f
		cases = append(cases, r)
	}
	for i := range cases {
		assert.Equal(t, string(marshalLine(t, &cases[i])), string(AppendLine(nil, &cases[i])), "case %d", i)
	}
}

func FuzzAppendLine(f *testing.F) {
	f.Add("alice", "<a>&\u2028", 182.4, int64(1_800_000_000_123))
	f.Add("\xff\x00", "", 1e-9, int64(0))
	f.Fuzz(func(t *testing.T, a, b string, d float64, nanos int64) {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return
		}
		r := fullRecord()
		r.Principal.Subject, r.Tool, r.Rule, r.DurationMS = a, b, a+b, d
		r.Time = time.Unix(0, nanos).UTC()
		want, err := json.Marshal(&r)
		if err != nil {
			return // a time json cannot write
		}
		assert.Equal(t, string(append(want, '\n')), string(AppendLine(nil, &r)))
	})
}

// TestLinesBatchedAndWhole: records written from many goroutines reach the
// file, each as a whole line that reads back, none lost while the queue
// has room; rotation still splits between lines.
func TestLinesBatchedAndWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(Config{To: path, MaxBytes: 64 << 10, Keep: 3}, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				r := fullRecord()
				r.BytesIn, r.BytesOut = g, i
				l.Write(r)
			}
		}()
	}
	wg.Wait()
	l.Close()
	assert.Zero(t, l.Dropped())
	total := 0
	for _, p := range []string{path, path + ".1", path + ".2", path + ".3"} {
		raw, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		assert.LessOrEqual(t, len(raw), 64<<10, "%s is within max_size", p)
		require.True(t, bytes.HasSuffix(raw, []byte("\n")))
		for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
			var r Record
			require.NoError(t, json.Unmarshal(line, &r), "%s", line)
			total++
		}
	}
	// 1,000 lines of ~480 bytes over 64 KiB files, 3 kept beside the
	// current one: the oldest went with rotation.
	assert.Greater(t, total, 0)
	assert.NoFileExists(t, path+".4")
}

func BenchmarkAppendLine(b *testing.B) {
	r := fullRecord()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendLine(buf[:0], &r)
	}
}

func BenchmarkJSONMarshal(b *testing.B) {
	r := fullRecord()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite is the whole cost of a line, as CPU of the process
// (getrusage: the caller's Write, the writer's encoding and its file
// writes) per record, cpu-ns/op: "burst" writes as fast as the queue
// takes them (waiting, not dropping, when it is half full), "paced" one
// record every 250 µs, as calls one at a time arrive; "paced-nolog" is
// that loop without a log, to subtract.
func BenchmarkWrite(b *testing.B) {
	for _, bc := range []struct {
		name string
		gap  time.Duration
		none bool // the loop alone, no log: what paced costs without a line
	}{{"burst", 0, false}, {"paced", 250 * time.Microsecond, false}, {"paced-nolog", 250 * time.Microsecond, true}} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := Open(Config{To: filepath.Join(b.TempDir(), "audit.jsonl"), MaxBytes: 1 << 30}, nilLogger())
			require.NoError(b, err)
			r := fullRecord()
			if bc.none {
				l.Close()
				l = nil
			}
			start := cpuTime()
			for b.Loop() {
				for l != nil && len(l.queue) > cap(l.queue)/2 {
					time.Sleep(100 * time.Microsecond)
				}
				l.Write(r)
				if bc.gap > 0 {
					time.Sleep(bc.gap)
				}
			}
			l.Close()
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
			require.Zero(b, l.Dropped())
		})
	}
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
