package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
)

// stdioSessionID is the session id mcp-go gives its one stdio session; the
// fast path below uses the same lease key so mcp_release, which mcp-go
// serves, finds the leases of calls the fast path served.
const stdioSessionID = "stdio"

var stdioLeaseKey = sessionKey(stdioSessionID)

// stdioEdge sits between the client's stdin and mcp-go's stdio server. A
// tools/call for an upstream tool is served right here: decoded once,
// routed, and answered with the upstream's raw bytes, its progress written
// before its result. Everything else (initialize, ping, tools/list, the
// admin tools, other notifications) passes through to mcp-go unchanged.
// Without it every call is decoded several times over inside mcp-go before
// it reaches the upstream.
type stdioEdge struct {
	p *Proxy
	w *lineWriter

	mu      sync.Mutex
	calls   map[string]context.CancelFunc // in-flight calls by request id
	workers callWorkers
}

// callWorkers runs calls on goroutines that outlive one call: a fresh goroutine
// starts with a small stack and grows it on every call's JSON work, which
// costs more than the call's own bookkeeping. Idle workers wait a while for
// the next call, then exit; there is never a limit on calls in flight.
type callWorkers struct {
	idle chan func()
}

// workerIdle is how long an idle worker waits for another call.
const workerIdle = 30 * time.Second

func (w *callWorkers) run(f func()) {
	select {
	case w.idle <- f: // a waiting worker takes it
	default:
		go w.work(f)
	}
}

func (w *callWorkers) work(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-w.idle:
		case <-t.C:
			return
		}
	}
}

var (
	toolsCallMethod = []byte(`"tools/call"`)
	toolsListMethod = []byte(`"tools/list"`)
	cancelledMethod = []byte(`"notifications/cancelled"`)
)

// pump reads the client's messages, serving calls and forwarding the rest
// to mcp-go through fwd, until in ends.
func (e *stdioEdge) pump(ctx context.Context, in io.Reader, fwd *io.PipeWriter) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if body := bytes.TrimSpace(line); len(body) > 0 && !e.serve(ctx, body) {
			if _, werr := fwd.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				e.p.log.Warn("reading stdin", "err", err)
			}
			_ = fwd.Close()
			return
		}
	}
}

type stdioRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type stdioCallParams struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
}

// serve takes the message if it is a call this edge serves or the
// cancellation of one, and reports whether it did.
func (e *stdioEdge) serve(ctx context.Context, line []byte) bool {
	if !bytes.Contains(line, toolsCallMethod) && !bytes.Contains(line, toolsListMethod) &&
		!bytes.Contains(line, cancelledMethod) {
		return false
	}
	var req stdioRequest
	if json.Unmarshal(line, &req) != nil {
		return false
	}
	switch {
	case req.Method == "notifications/cancelled" && len(req.ID) == 0:
		var c struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &c) != nil {
			return false
		}
		e.mu.Lock()
		cancel := e.calls[string(bytes.TrimSpace(c.RequestID))]
		e.mu.Unlock()
		if cancel == nil {
			return false // one of mcp-go's requests
		}
		cancel()
		return true
	case req.Method == "tools/list" && len(req.ID) > 0:
		select {
		case <-e.p.loaded:
		default:
			return false // mcp-go answers once the first load is done
		}
		// The whole catalog in one page, rendered once per commit.
		e.w.writeLine(message5(`{"jsonrpc":"2.0","id":`, req.ID, `,"result":{"tools":`, e.p.Catalog().ToolsJSON(), `}}`))
		return true
	case req.Method == "tools/call" && len(req.ID) > 0:
		var params stdioCallParams
		if json.Unmarshal(req.Params, &params) != nil {
			return false
		}
		entry, ok := e.p.Catalog().Lookup(params.Name)
		if !ok || entry.Server == adminServer {
			// Admin tools and names not (yet) in the catalog: mcp-go answers,
			// after waiting for the first load when it is still running.
			return false
		}
		e.workers.run(func() { e.call(ctx, req.ID, params) })
		return true
	}
	return false
}

func (e *stdioEdge) call(ctx context.Context, id json.RawMessage, params stdioCallParams) {
	ctx, cancel := context.WithCancel(ctx)
	key := string(bytes.TrimSpace(id))
	e.mu.Lock()
	e.calls[key] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.calls, key)
		e.mu.Unlock()
		cancel()
	}()

	inv := invocation{name: params.Name, key: stdioLeaseKey, args: params.Arguments}
	if token, ok := params.Meta["progressToken"]; ok {
		inv.token = token
		inv.progress = func(progress json.RawMessage) {
			e.w.writeLine(message3(`{"jsonrpc":"2.0","method":"notifications/progress","params":`, progress, `}`))
		}
		delete(params.Meta, "progressToken")
	}
	if len(params.Meta) > 0 {
		inv.meta = params.Meta
	}
	result, rpcErr, err := e.p.invoke(ctx, inv)
	switch {
	case err != nil:
		// Cancelled by the client: the protocol expects no response.
	case rpcErr != nil:
		e.w.writeLine(message5(`{"jsonrpc":"2.0","id":`, id, `,"error":`, rpcErr, `}`))
	default:
		e.w.writeLine(message5(`{"jsonrpc":"2.0","id":`, id, `,"result":`, result, `}`))
	}
}

func message3(a string, b []byte, c string) []byte {
	out := make([]byte, 0, len(a)+len(b)+len(c)+1)
	return append(append(append(out, a...), b...), c...)
}

func message5(a string, b []byte, c string, d []byte, e string) []byte {
	out := make([]byte, 0, len(a)+len(b)+len(c)+len(d)+len(e)+1)
	return append(append(append(append(append(out, a...), b...), c...), d...), e...)
}
