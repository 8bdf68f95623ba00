package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// observed is an Observer that keeps what it is told.
type observed struct {
	mu      sync.Mutex
	calls   []observedCall
	reloads []Reload
	events  []string
}

type observedCall struct {
	server, tool string
	outcome      CallOutcome
	elapsed      time.Duration
}

func (o *observed) ToolCalled(e *catalog.Entry, outcome CallOutcome, elapsed time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := observedCall{outcome: outcome, elapsed: elapsed}
	if e != nil {
		c.server, c.tool = e.Server, e.Exported
	}
	o.calls = append(o.calls, c)
}

func (o *observed) Reloaded(r Reload) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reloads = append(o.reloads, r)
}

func (o *observed) InstanceEvent(server, kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, server+" "+kind)
}

func TestObserverSeesCallsAndReloads(t *testing.T) {
	obs := &observed{}
	p := newTestProxyWith(t, Options{Observer: obs})
	report := reconcile(t, p, load(t, t.TempDir(), baseServers()))
	require.Empty(t, report.Failed)
	c := connect(t, p)

	c.callTool("demo_echo", map[string]any{"text": "hi"})
	c.callTool("demo_fail", map[string]any{"message": "no"})
	m := c.call("tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
	require.NotEmpty(t, m.Error)

	obs.mu.Lock()
	calls := append([]observedCall(nil), obs.calls...)
	obs.mu.Unlock()
	require.Len(t, calls, 3)
	assert.Equal(t, observedCall{server: "tools", tool: "demo_echo", outcome: CallOK}, observedCall{server: calls[0].server, tool: calls[0].tool, outcome: calls[0].outcome})
	assert.Equal(t, observedCall{server: "tools", tool: "demo_fail", outcome: CallToolError}, observedCall{server: calls[1].server, tool: calls[1].tool, outcome: calls[1].outcome})
	assert.Equal(t, observedCall{outcome: CallError}, observedCall{server: calls[2].server, tool: calls[2].tool, outcome: calls[2].outcome})
	for _, call := range calls {
		assert.Positive(t, call.elapsed)
	}

	// A workspace-level error is a rejected reload.
	p.Reconcile(context.Background(), nil, nil)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Len(t, obs.reloads, 2)
	assert.Equal(t, ReloadOK, obs.reloads[0].Outcome)
	assert.True(t, obs.reloads[0].Changed)
	assert.Equal(t, ReloadRejected, obs.reloads[1].Outcome)
	assert.Equal(t, obs.reloads[0].Version, obs.reloads[1].Version)
}

func TestCallOutcome(t *testing.T) {
	timedOut, cancel := context.WithCancelCause(context.Background())
	cancel(ErrTimeout)
	cases := []struct {
		name    string
		ctx     context.Context
		result  string
		rpcErr  *jsonrpc.Error
		err     error
		outcome CallOutcome
	}{
		{"result", context.Background(), `{"content":[]}`, nil, nil, CallOK},
		{"isError false", context.Background(), `{"content":[],"isError":false}`, nil, nil, CallOK},
		{"isError true", context.Background(), `{"isError":true,"content":[]}`, nil, nil, CallToolError},
		{"isError nested only", context.Background(), `{"content":[{"type":"text","text":"x","isError":true}]}`, nil, nil, CallOK},
		{"rpc error", context.Background(), ``, &jsonrpc.Error{Code: -32602}, nil, CallError},
		{"timeout", timedOut, ``, &jsonrpc.Error{Code: -32603}, nil, CallTimeout},
		{"cancelled", context.Background(), ``, nil, context.Canceled, CallCancelled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.outcome, callOutcome(tc.ctx, []byte(tc.result), tc.rpcErr, tc.err))
		})
	}
	for _, o := range CallOutcomes() {
		assert.NotContains(t, o.String(), "outcome(")
	}
}

// BenchmarkCallOutcome measures the one pass over a result that telling
// ok from tool_error costs, for a small and for a 1 MiB result.
func BenchmarkCallOutcome(b *testing.B) {
	big := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("0123456789abcdef", 1<<16) + `"}],"isError":false}`)
	for _, tc := range []struct {
		name   string
		result []byte
	}{{"small", []byte(`{"content":[{"type":"text","text":"hello"}]}`)}, {"1MiB", big}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.result)))
			b.ReportAllocs()
			for b.Loop() {
				if callOutcome(context.Background(), tc.result, nil, nil) != CallOK {
					b.Fatal("not ok")
				}
			}
		})
	}
}

func TestIsToolError(t *testing.T) {
	for raw, want := range map[string]bool{
		``: false, `{"content":[]}`: false, `{"isError":true}`: true, `{"isError":false}`: false,
		`{"content":[{"type":"text","text":"isError"}]}`: false, `{"is\u0045rror":true}`: true,
	} {
		assert.Equal(t, want, isToolError(json.RawMessage(raw)), raw)
	}
}

// resultHead reads in one pass what isTaskHandle and callOutcome read in
// a pass each, and agrees with both.
func TestResultHead(t *testing.T) {
	for _, result := range []string{
		`{"content":[]}`,
		`{"content":[],"isError":false}`,
		`{"isError":true,"content":[]}`,
		`{"isError" : true}`,
		`{"isError":false,"isError":true}`,
		`{"content":[{"type":"text","text":"x","isError":true}]}`,
		`{"resultType":"task","taskId":"x"}`,
		`{"resultType":"complete","task":{"taskId":"x"}}`,
		`{"resultType":"task","isError":true}`,
	} {
		taskHandle, isError := resultHead(json.RawMessage(result))
		require.NotEqual(t, unread, isError, result)
		assert.Equal(t, isTaskHandle(json.RawMessage(result)), taskHandle, result)
		assert.Equal(t, callOutcome(context.Background(), []byte(result), nil, nil),
			outcomeOf(context.Background(), nil, nil, nil, isError), result)
	}
	_, isError := resultHead(json.RawMessage(`[1]`))
	assert.Equal(t, unread, isError, "not an object: read on its own")
}
