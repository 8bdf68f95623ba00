//go:build !windows

package jsonrpc

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time this process has used: what a benchmark's
// cpu-ns/op counts, which a loaded machine's other work does not inflate
// as it does the wall clock's ns/op.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeBorrowed decodes the two messages of every call: its
// request, as a client sends it, and its answer, as an upstream does.
func BenchmarkDecodeBorrowed(b *testing.B) {
	for _, c := range []struct{ name, line string }{
		{"request", `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"srv_echo","arguments":{"text":"hello from the benchmark"},"_meta":{"progressToken":17}}}`},
		{"answer", `{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello from the benchmark"}],"isError":false}}`},
	} {
		line := []byte(c.line)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var m Message
			start := processCPU(b)
			for b.Loop() {
				if err := DecodeBorrowed(&m, line); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
