package upstream

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// A message larger than the pipe goes out in parts, as the upstream reads,
// while other callers wait for the write slot. Such messages, from several
// callers at once, must still arrive whole and framed.
func TestWritesLargerThanThePipeArriveWhole(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 256 KiB and more: four pipes' worth, a different size per caller.
			text := strings.Repeat(string(rune('a'+i)), 1<<18+i*4099)
			raw, err := inst.CallTool(ctx, Call{Name: "echo", Arguments: json.RawMessage(`{"text":"` + text + `"}`)})
			if !assert.NoError(t, err) {
				return
			}
			var res struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if !assert.NoError(t, json.Unmarshal(raw, &res)) || !assert.Len(t, res.Content, 1) {
				return
			}
			assert.True(t, res.Content[0].Text == text, "caller %d got its own text back whole", i)
		}()
	}
	wg.Wait()
}

// BenchmarkWrite is one request line written to an upstream's stdin, a
// pipe that a goroutine drains: the write slot, the checks, one write(2);
// "bookkeeping" writes nothing, which leaves the write's own work alone.
func BenchmarkWrite(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	c := &stdioConn{server: "bench", stdin: w, pipe: pipeio.New(w), writeSlot: make(chan struct{}, 1), closed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name string
		line string
	}{
		{"line", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n"},
		{"bookkeeping", ""},
	} {
		line := []byte(bc.line)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.write(ctx, line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
