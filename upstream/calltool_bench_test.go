//go:build !windows

package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// processCPU is the CPU time this process has used, user and system: the
// calling side of a call, without the upstream process's.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCallTool is one tools/call through a stdio instance to the demo
// echo tool, as the proxy makes it: with a handler of the upstream's
// requests, and for "progress" with the caller's progress token. The
// upstream is another process, so allocs/op and cpu-ns/op are this side's
// alone (cpu-ns/op includes the collector and the system calls): the
// request written, the answer read and handed back.
func BenchmarkCallTool(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	inst, err := Start(ctx, demoServer("tools", "tools"), Options{Logger: newLogRecorder().Logger()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = inst.Close() }()
	ask := func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) { return nil, nil }
	principal := identity.Principal{}
	for _, c := range []struct {
		name     string
		params   string
		progress bool
	}{
		{"plain", `{"name":"srv_echo","arguments":{"text":"hi"}}`, false},
		{"progress", `{"name":"srv_echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`, true},
	} {
		call := Call{Name: "echo", Params: json.RawMessage(c.params), Arguments: json.RawMessage(`{"text":"hi"}`),
			Withhold: withheldForTest, OnServerRequest: ask, Principal: principal}
		if c.progress {
			call.ProgressToken = json.RawMessage(`1`)
			call.OnProgress = func(json.RawMessage) {}
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			start := processCPU(b)
			for b.Loop() {
				if _, err := inst.CallTool(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkCallToolInProcess is BenchmarkCallTool with the upstream's end
// of the pipes served by a goroutine of this process that answers each
// request at once with a fixed echo result: all of a call's CPU is in
// cpu-ns/op, with little of a server's, so that a cut of a few hundred
// nanoseconds on the upstream side of the call path shows.
func BenchmarkCallToolInProcess(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// A real process (an idle demo server), for what the connection does
	// with one when it ends; its pipes are left unused.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), demoEnv+"=tools")
	c, err := startStdio("bench", cmd, newLogRecorder().Logger(),
		stdioOptions{stdinGrace: 10 * time.Millisecond, termGrace: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	upR, stdin, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, upW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	// The server's own stdin stays open (and referenced), or it would end.
	serverStdin := c.stdin
	defer runtime.KeepAlive(serverStdin)
	c.stdin, c.pipe = stdin, pipeio.New(stdin)
	go echoUpstream(upR, upW)
	go c.read(pipeio.New(stdout))
	inst := &Instance{server: "bench", conn: c, log: c.log, progress: map[int64]*progressSink{}}
	defer func() { _ = inst.Close(); _ = upR.Close(); _ = stdout.Close() }()

	ask := func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) { return nil, nil }
	call := Call{Name: "echo", Params: json.RawMessage(`{"name":"srv_echo","arguments":{"text":"hi"}}`),
		Arguments: json.RawMessage(`{"text":"hi"}`), Withhold: withheldForTest, OnServerRequest: ask}
	b.ReportAllocs()
	start := processCPU(b)
	for b.Loop() {
		if _, err := inst.CallTool(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// echoUpstream answers every request line read from r on w with an echo
// tool's result, until r ends.
func echoUpstream(r io.Reader, w io.WriteCloser) {
	defer w.Close()
	const head, tail = `{"jsonrpc":"2.0","id":`, `,"result":{"content":[{"type":"text","text":"hi"}]}}` + "\n"
	lines := bufio.NewReader(r)
	var out []byte
	for {
		line, err := lines.ReadSlice('\n')
		if err != nil {
			return
		}
		_, rest, _ := bytes.Cut(line, []byte(`"id":`))
		end := bytes.IndexAny(rest, ",}")
		if end < 0 {
			return
		}
		out = append(append(append(out[:0], head...), rest[:end]...), tail...)
		if _, err := w.Write(out); err != nil {
			return
		}
	}
}
