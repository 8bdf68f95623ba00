package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// echoResult is what benchHandler answers a tools/call with.
var echoResult = json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)

// benchHandler answers initialize with 2025-11-25 and anything else with
// echoResult, doing no work of its own: what is measured is the transport.
type benchHandler struct{}

func (benchHandler) Handle(_ context.Context, req *Request) *jsonrpc.Message {
	if req.Msg.Method == "initialize" {
		return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"b","version":"1"}}`)}
	}
	return &jsonrpc.Message{Result: echoResult}
}
func (benchHandler) Notified(context.Context, Session, *jsonrpc.Message) {}
func (benchHandler) SessionOpened(Session)                               {}
func (benchHandler) SessionClosed(Session)                               {}

// BenchmarkStdioCall is the stdio transport's own part of a tools/call
// (ServeStdio over the operating system's pipes, read and written through
// internal/pipeio as the aggregator's stdin and stdout are, with a Handler
// that answers at once): the client writes inflight requests, then reads
// their answers. Allocations include the Handler's one response.
func BenchmarkStdioCall(b *testing.B) {
	for _, inflight := range []int{1, 16} {
		b.Run("inflight="+strconv.Itoa(inflight), func(b *testing.B) {
			benchStdioCall(b, inflight, `{"name":"echo","arguments":{"text":"hi"}}`)
		})
	}
	b.Run("progressToken/inflight=1", func(b *testing.B) {
		benchStdioCall(b, 1, `{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`)
	})
}

func benchStdioCall(b *testing.B, inflight int, params string) {
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(context.Background(), benchHandler{}, pipeio.New(inR), pipeio.New(outW), StdioOptions{})
	}()
	b.Cleanup(func() {
		inW.Close()
		<-served
		_, _, _ = inR.Close(), outW.Close(), outR.Close()
	})
	out := bufio.NewReaderSize(outR, 64<<10)
	answer := func() {
		if _, err := out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	write := func(line []byte) {
		if _, err := inW.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	answer()
	var line []byte
	id := int64(0)
	before := userTime()
	for b.Loop() {
		line = line[:0]
		for range inflight {
			id++
			line = append(line, `{"jsonrpc":"2.0","id":`...)
			line = strconv.AppendInt(line, id, 10)
			line = append(line, `,"method":"tools/call","params":`...)
			line = append(line, params...)
			line = append(line, "}\n"...)
		}
		write(line)
		for range inflight {
			answer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(userTime()-before)/1e3/float64(b.N), "user-µs/op")
}

// userTime is the CPU time the process spent in user mode, in ns: the
// instructions run, without the system calls' own, which dominate a
// round trip over pipes and vary with the machine's load.
func userTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano()
}

// BenchmarkStdioStartEnd is a request's bookkeeping on the stdio
// transport, without its serving: start (the call, its context, its place
// in the table of requests in flight) and end.
func BenchmarkStdioStartEnd(b *testing.B) {
	ctx := context.Background()
	s := &stdioSession{detached: ctx, ob: newLineQueue(1)}
	msg := jsonrpc.Message{Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}
	var id []byte
	n := int64(0)
	for b.Loop() {
		n++
		id = strconv.AppendInt(id[:0], n, 10)
		msg.ID = id
		c := s.start(ctx, &msg, nil)
		c.end()
		s.wg.Done()
	}
}

// BenchmarkCallTable is one request's id in the table of requests in
// flight: its key, the look for a duplicate, its entry and its removal.
func BenchmarkCallTable(b *testing.B) {
	var t callTable
	c := &stdioCall{}
	var id []byte
	n := int64(0)
	for b.Loop() {
		n++
		id = strconv.AppendInt(id[:0], n, 10)
		k := keyOf(id)
		if t.get(k) != nil {
			b.Fatal("an id seen twice")
		}
		t.put(k, c)
		t.del(k)
	}
}
