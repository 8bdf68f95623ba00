package upstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// BenchmarkCallTool is one tools/call through a stdio instance to the demo
// echo tool, as the proxy makes it: with a handler of the upstream's
// requests, and for "progress" with the caller's progress token. The
// upstream is another process, so allocs/op is this side's alone: the
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
			for b.Loop() {
				if _, err := inst.CallTool(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
