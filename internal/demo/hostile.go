package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// floodServer is the misbehave mode "flood": a hand-written server whose
// flood tool writes notifications/tools/list_changed as fast as its stdout
// takes them, for a given number of seconds, and whose progress tool
// answers a call with a stream of big progress notifications, while it
// keeps answering other requests. It counts the tools/list requests it
// receives, so a test can tell how many relists a flood caused.
//
// Tools:
//   - flood {seconds, changing}: floods, then answers {"sent": n}. With
//     changing, every tools/list during the flood offers one more tool
//     (gen_1, gen_2, ...), so every relist sees a new catalog.
//   - progress {count, bytes, interval_ms}: when the call has a progress
//     token, sends count notifications/progress whose message is bytes
//     long, one every interval_ms, then answers {"sent": count}.
//   - stats: answers {"lists": tools/list requests so far, "sent":
//     notifications sent so far, "gen": the number of the extra tool the
//     list offers now, 0 for none}.
type floodServer struct {
	conn  *lineConn
	lists atomic.Int64
	sent  atomic.Int64
	// gen is the number of the extra tool tools/list offers; 0 for none.
	gen atomic.Int64
	// changing is set while a changing flood runs.
	changing atomic.Bool
	wg       sync.WaitGroup
}

// maxFloodSeconds bounds one flood so a typo cannot flood for ever.
const maxFloodSeconds = 60

func runFlood(ctx context.Context, in io.Reader, out io.Writer, errOut io.Writer) error {
	s := &floodServer{conn: &lineConn{out: out}}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	return serveLines(ctx, in, func(line []byte) error { return s.handle(ctx, line, errOut) })
}

func (s *floodServer) handle(ctx context.Context, line []byte, errOut io.Writer) error {
	m, ok, err := s.conn.request(line, "demo-flood")
	if !ok {
		return err
	}
	switch m.Method {
	case "tools/list":
		n := s.lists.Add(1)
		if s.changing.Load() {
			s.gen.Store(n)
		}
		return s.conn.respondValue(m.ID, map[string]any{"tools": s.tools()})
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Seconds    float64 `json:"seconds"`
				Changing   bool    `json:"changing"`
				Count      int     `json:"count"`
				Bytes      int     `json:"bytes"`
				IntervalMS int     `json:"interval_ms"`
			} `json:"arguments"`
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return s.conn.failCode(m.ID, codeInvalidParams, "invalid tools/call params: "+err.Error())
		}
		args := p.Arguments
		switch p.Name {
		case "stats":
			return s.conn.respondValue(m.ID, structuredResult(map[string]any{"lists": s.lists.Load(), "sent": s.sent.Load(), "gen": s.gen.Load()}))
		case "flood":
			if args.Seconds <= 0 || args.Seconds > maxFloodSeconds {
				return s.conn.failCode(m.ID, codeInvalidParams, fmt.Sprintf("flood: seconds must be in (0, %d]", maxFloodSeconds))
			}
			// The flood runs beside the read loop, so that the relists it
			// provokes are answered while it lasts. A changing flood changes
			// the next list already, whenever the flood's goroutine starts.
			if args.Changing {
				s.changing.Store(true)
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				sent := s.flood(ctx, time.Duration(args.Seconds*float64(time.Second)))
				s.changing.Store(false)
				fmt.Fprintf(errOut, "flood: sent %d notifications/tools/list_changed\n", sent)
				_ = s.conn.respondValue(m.ID, structuredResult(map[string]any{"sent": sent}))
			}()
			return nil
		case "progress":
			if args.Count < 0 || args.Bytes < 0 || args.Bytes > maxBigBytes || args.IntervalMS < 0 ||
				time.Duration(args.Count)*time.Duration(args.IntervalMS)*time.Millisecond > maxFloodSeconds*time.Second {
				return s.conn.failCode(m.ID, codeInvalidParams, fmt.Sprintf("progress: count, bytes and interval_ms must not be negative, and count*interval_ms at most %ds", maxFloodSeconds))
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				sent := s.progress(ctx, p.Meta.ProgressToken, args.Count, args.Bytes, time.Duration(args.IntervalMS)*time.Millisecond)
				_ = s.conn.respondValue(m.ID, structuredResult(map[string]any{"sent": sent}))
			}()
			return nil
		default:
			return s.conn.failCode(m.ID, codeInvalidParams, "unknown tool: "+p.Name)
		}
	default:
		return s.conn.failCode(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

// flood writes list_changed notifications until d has passed or ctx ends,
// and returns how many it wrote.
func (s *floodServer) flood(ctx context.Context, d time.Duration) int64 {
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n")
	end := time.Now().Add(d)
	var n int64
	for ctx.Err() == nil {
		// Checking the clock costs more than a write; look every 64 lines.
		if n%64 == 0 && time.Now().After(end) {
			break
		}
		if err := s.conn.write(line, false); err != nil {
			break
		}
		n++
		s.sent.Add(1)
	}
	return n
}

// progress sends count progress notifications for token, each carrying a
// message of n bytes, one per interval, and returns how many it wrote.
func (s *floodServer) progress(ctx context.Context, token json.RawMessage, count, n int, interval time.Duration) int {
	message := pattern(n)
	tick := time.NewTicker(max(interval, time.Microsecond))
	defer tick.Stop()
	sent := 0
	for i := 1; i <= count; i++ {
		select {
		case <-ctx.Done():
			return sent
		case <-tick.C:
		}
		if len(token) == 0 {
			continue
		}
		if err := s.conn.notify("notifications/progress", progressParams(token, i, count, message)); err != nil {
			return sent
		}
		sent++
	}
	return sent
}

func (s *floodServer) tools() []any {
	object := map[string]any{"type": "object", "properties": map[string]any{}}
	tools := []any{
		map[string]any{
			"name":        "flood",
			"description": "Floods notifications/tools/list_changed for the given seconds.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
				"seconds":  map[string]any{"type": "number"},
				"changing": map[string]any{"type": "boolean"},
			}, "required": []string{"seconds"}},
		},
		map[string]any{
			"name":        "progress",
			"description": "Answers with a stream of big progress notifications.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
				"count":       map[string]any{"type": "integer"},
				"bytes":       map[string]any{"type": "integer"},
				"interval_ms": map[string]any{"type": "integer"},
			}},
		},
		map[string]any{"name": "stats", "description": "Counts tools/list requests and notifications sent.", "inputSchema": object},
	}
	if g := s.gen.Load(); g > 0 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("gen_%d", g), "description": "Changes with every relist.", "inputSchema": object})
	}
	return tools
}

// structuredResult is a tool result carrying v as structuredContent and as
// JSON text.
func structuredResult(v map[string]any) map[string]any {
	text, _ := marshal(v)
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}, "structuredContent": v}
}
