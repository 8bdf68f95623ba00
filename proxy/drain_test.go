package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// lineSignal is a log destination that signals each line holding want.
type lineSignal struct {
	want string
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
}

func (l *lineSignal) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(b)
	if bytes.Contains(b, []byte(l.want)) {
		select {
		case l.seen <- struct{}{}:
		default:
		}
	}
	return len(b), nil
}

// TestCallCutByReloadSaysWhy: a reload removes or changes a server while a
// call runs on it, and the call outlasts the time a retired server's calls
// are given. The client hears that the reload closed the instance, and
// whether to call again; not that the upstream exited, as if it had
// crashed.
func TestCallCutByReloadSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after string // the servers of the reloaded config
		want  string
	}{
		{"removed", "servers: {}\n",
			`tool "wait": server "slow" was removed from the config while this request ran, and its instances were closed when the request had not finished 300ms later; the server's tools are gone (see tools/list)`},
		{"changed", slowServer("two"),
			`tool "wait": server "slow" was changed in the config while this request ran, and its old instances were closed when the request had not finished 300ms later; send it again to run it on the new instance`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lineSignal{want: "wait: started", seen: make(chan struct{}, 1)}
			p := New(Options{
				Logger:      slog.New(slog.NewTextHandler(logs, nil)),
				Upstream:    upstream.Options{StdinGrace: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond},
				ReloadDrain: 300 * time.Millisecond,
			})
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				p.Close(ctx)
			})
			dir := t.TempDir()
			apply := func(servers string) {
				ws, problems := config.LoadBytes(filepath.Join(dir, "mcp.yaml"), []byte("version: 1\n"+servers), nil)
				require.NotNil(t, ws, "problems: %v", problems)
				reconcile(t, p, ws)
			}
			apply(slowServer("one"))
			c := connect(t, p)

			// The call, made without the test goroutine's helpers, which may not
			// fail the test from another goroutine.
			c.mu.Lock()
			c.nextID++
			id := c.nextID
			answer := make(chan wireMessage, 1)
			c.pending[strconv.Itoa(id)] = answer
			c.mu.Unlock()
			c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
				"params": map[string]any{"name": "wait", "arguments": map[string]any{"ms": 600000}}})
			select {
			case <-logs.seen:
			case <-time.After(waitTimeout):
				t.Fatalf("the call never started upstream; log:\n%s", logs.buf.String())
			}

			apply(tc.after)
			select {
			case m := <-answer:
				want := fmt.Sprintf(`{"code":-32603,"message":%q}`, tc.want)
				assert.JSONEq(t, want, string(m.Error), "%s", m.Line)
			case <-time.After(waitTimeout):
				t.Fatal("the call cut short by the reload never got an answer")
			}
			if tc.name == "changed" {
				res := c.callTool("wait", map[string]any{"ms": 1})
				assert.Contains(t, string(res), "waited", "sent again, the call runs on the new instance")
			}
		})
	}
}

// slowServer is a server "slow" running the demo surface server, whose
// wait tool answers when asked to; mark tells two definitions apart.
func slowServer(mark string) string {
	return fmt.Sprintf("servers:\n  slow:\n    truely-stateless: true\n    command: %q\n    env: {%s: surface, MARK: %s}\n",
		os.Args[0], demoEnv, mark)
}
