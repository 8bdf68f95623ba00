package demo

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	assert.Equal(t, []string{"counter", "daemon", "fidelity", "misbehave", "surface", "tools"}, Names())
}

func TestRunRejectsBadInput(t *testing.T) {
	ctx := t.Context()
	err := Run(ctx, "nope", nil, strings.NewReader(""), &lockedBuffer{}, nil)
	require.ErrorContains(t, err, `unknown server "nope"`)
	require.ErrorContains(t, Run(ctx, "misbehave", nil, strings.NewReader(""), &lockedBuffer{}, nil), "needs a mode")
	require.ErrorContains(t, Run(ctx, "misbehave", []string{"bogus"}, strings.NewReader(""), &lockedBuffer{}, nil), "unknown misbehave mode")
	require.ErrorContains(t, Run(ctx, "misbehave", []string{"crash-after", "x"}, strings.NewReader(""), &lockedBuffer{}, nil), "positive integer")
	require.ErrorContains(t, Run(ctx, "tools", []string{"x"}, strings.NewReader(""), &lockedBuffer{}, nil), "no arguments")
	require.ErrorContains(t, Run(ctx, "tools", []string{"--mutable", "--mutable"}, strings.NewReader(""), &lockedBuffer{}, nil), "no arguments")
	require.ErrorContains(t, Run(ctx, "tools", []string{"--mutable", "--env"}, strings.NewReader(""), &lockedBuffer{}, nil), "no arguments")
}

// TestToolsServerMutable: with --mutable, hide_tool takes a tool out of the list and
// show_tool puts it back, each announced by notifications/tools/list_changed.
func TestToolsServerMutable(t *testing.T) {
	c := start(t, "tools", "--mutable", "--env", "HOME")
	c.initialize("2025-11-25")
	c.notify("notifications/initialized", nil)
	all := []string{"echo", "add", "pid", "big", "slow", "fail", "env", "hide_tool", "show_tool"}
	assert.ElementsMatch(t, all, toolNames(t, c.mustCall("tools/list", nil)))

	assert.Equal(t, "hid env", c.callTool("hide_tool", map[string]any{"name": "env"}).Content[0].Text)
	assert.Equal(t, "notifications/tools/list_changed", c.nextNotification().Method)
	assert.NotContains(t, toolNames(t, c.mustCall("tools/list", nil)), "env")
	assert.True(t, c.callTool("hide_tool", map[string]any{"name": "env"}).IsError, "env is hidden already")
	assert.True(t, c.callTool("hide_tool", map[string]any{"name": "show_tool"}).IsError, "show_tool stays")

	assert.Equal(t, "showed env", c.callTool("show_tool", map[string]any{"name": "env"}).Content[0].Text)
	assert.Equal(t, "notifications/tools/list_changed", c.nextNotification().Method)
	assert.ElementsMatch(t, all, toolNames(t, c.mustCall("tools/list", nil)))
	assert.True(t, c.callTool("show_tool", map[string]any{"name": "env"}).IsError, "env is not hidden")
	r := c.callTool("env", map[string]any{"name": "PATH"})
	assert.True(t, r.IsError, "the tool put back keeps its --env bound")
}

func TestPattern(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 100} {
		p := pattern(n)
		require.Len(t, p, n)
		for i := range n {
			require.Equal(t, "0123456789abcdef"[i%16], p[i])
		}
	}
}

func TestToolsServer(t *testing.T) {
	c := start(t, "tools")
	init := c.initialize("2025-06-18")
	assert.Equal(t, "2025-06-18", init["protocolVersion"])
	assert.Equal(t, "demo-tools", init["serverInfo"].(map[string]any)["name"])
	assert.Equal(t, true, init["capabilities"].(map[string]any)["tools"].(map[string]any)["listChanged"])

	list := c.mustCall("tools/list", nil)
	assert.ElementsMatch(t, []string{"echo", "add", "pid", "big", "slow", "fail", "env"}, toolNames(t, list))
	var tools struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(list, &tools))
	for _, tool := range tools.Tools {
		if tool.Name == "add" {
			assert.JSONEq(t, `{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`, string(tool.OutputSchema))
		}
		if tool.Name == "slow" {
			schema := decodeMap(t, tool.InputSchema)
			assert.Equal(t, json.Number("10"), schema["properties"].(map[string]any)["steps"].(map[string]any)["default"])
		}
	}

	r := c.callTool("echo", map[string]any{"text": "hello <world> & \"you\""})
	require.Len(t, r.Content, 1)
	assert.Equal(t, "text", r.Content[0].Type)
	assert.Equal(t, "hello <world> & \"you\"", r.Content[0].Text)
	assert.False(t, r.IsError)

	r = c.callTool("add", map[string]any{"a": 2, "b": 3.5})
	assert.Equal(t, "5.5", r.Content[0].Text)
	assert.Equal(t, map[string]any{"sum": json.Number("5.5")}, r.StructuredContent)

	r = c.callTool("pid", map[string]any{})
	pid := strconv.Itoa(os.Getpid())
	assert.Equal(t, pid, r.Content[0].Text)
	assert.Equal(t, map[string]any{"pid": json.Number(pid)}, r.StructuredContent)

	for _, n := range []int{0, 1, 1000, 3 << 20} {
		r = c.callTool("big", map[string]any{"bytes": n})
		require.Len(t, r.Content, 1)
		require.Equal(t, pattern(n), r.Content[0].Text)
	}
	r = c.callTool("big", map[string]any{"bytes": -1})
	assert.True(t, r.IsError)

	r = c.callTool("fail", map[string]any{"message": "it broke"})
	assert.True(t, r.IsError)
	assert.Equal(t, "it broke", r.Content[0].Text)

	t.Setenv("DEMO_TEST_ENV_VALUE", "from the environment")
	r = c.callTool("env", map[string]any{"name": "DEMO_TEST_ENV_VALUE"})
	assert.Equal(t, "from the environment", r.Content[0].Text)
	r = c.callTool("env", map[string]any{"name": "DEMO_TEST_ENV_UNSET_" + pid})
	assert.Empty(t, r.Content[0].Text)

	r = c.callTool("slow", map[string]any{"seconds": 0})
	assert.Equal(t, "done after 10 steps", r.Content[0].Text)
}

func TestToolsSlowProgress(t *testing.T) {
	c := start(t, "tools")
	c.initialize("2025-06-18")

	res := c.mustCall("tools/call", map[string]any{
		"name":      "slow",
		"arguments": map[string]any{"seconds": 0.03, "steps": 3},
		"_meta":     map[string]any{"progressToken": "tok-slow"},
	})
	assert.Equal(t, "done after 3 steps", decodeToolResult(t, res).Content[0].Text)

	// Every notification was written before the response.
	require.Len(t, c.notifications, 3)
	for i := 1; i <= 3; i++ {
		n := c.nextNotification()
		require.Equal(t, "notifications/progress", n.Method)
		p := decodeMap(t, n.Params)
		assert.Equal(t, "tok-slow", p["progressToken"])
		assert.Equal(t, json.Number(strconv.Itoa(i)), p["progress"])
		assert.Equal(t, json.Number("3"), p["total"])
		assert.Equal(t, "step "+strconv.Itoa(i)+" of 3", p["message"])
	}

	// Without a token there are no notifications.
	res = c.mustCall("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0, "steps": 2}})
	assert.Equal(t, "done after 2 steps", decodeToolResult(t, res).Content[0].Text)
	c.mustCall("ping", nil)
	select {
	case n := <-c.notifications:
		t.Fatalf("unexpected notification %s %s", n.Method, n.Params)
	default:
	}
}

func TestToolsSlowCancelled(t *testing.T) {
	c := start(t, "tools")
	c.initialize("2025-06-18")
	marker := filepath.Join(t.TempDir(), "marker")

	id, ch := c.request("tools/call", map[string]any{
		"name":      "slow",
		"arguments": map[string]any{"seconds": 600, "steps": 60000, "marker": marker},
		"_meta":     map[string]any{"progressToken": 7},
	})
	// The first progress notification shows the handler is running.
	n := c.nextNotification()
	require.Equal(t, "notifications/progress", n.Method)
	c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "test"})

	// mcp-go still answers a cancelled request; its handler has finished by then.
	c.await(ch)
	got, err := os.ReadFile(marker)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", string(got))
	assert.Contains(t, c.stderr.String(), "slow: cancelled")
}

func TestToolsSlowCancelledByEOF(t *testing.T) {
	c := start(t, "tools")
	c.initialize("2025-06-18")
	marker := filepath.Join(t.TempDir(), "marker")
	c.request("tools/call", map[string]any{
		"name":      "slow",
		"arguments": map[string]any{"seconds": 600, "steps": 60000, "marker": marker},
		"_meta":     map[string]any{"progressToken": "eof"},
	})
	c.nextNotification()
	require.NoError(t, c.stop())
	got, err := os.ReadFile(marker)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", string(got))
}

func TestToolsConcurrentCalls(t *testing.T) {
	c := start(t, "tools")
	c.initialize("2025-06-18")
	const calls = 40
	const each = 0.25 // seconds; run one after another they would take 10s
	began := time.Now()
	var wg sync.WaitGroup
	for range calls {
		_, ch := c.request("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": each, "steps": 1}})
		wg.Go(func() {
			r := c.await(ch)
			assert.Nil(t, r.err)
			assert.Equal(t, "done after 1 steps", decodeToolResult(t, r.result).Content[0].Text)
		})
	}
	wg.Wait()
	assert.Less(t, time.Since(began), time.Duration(calls*each*float64(time.Second))/2, "calls did not run in parallel")
}

func TestCounterServer(t *testing.T) {
	c := start(t, "counter")
	init := c.initialize("2025-11-25")
	assert.Equal(t, "demo-counter", init["serverInfo"].(map[string]any)["name"])
	assert.ElementsMatch(t, []string{"increment", "get", "pid"}, toolNames(t, c.mustCall("tools/list", nil)))

	r := c.callTool("get", nil)
	assert.Equal(t, "0", r.Content[0].Text)
	r = c.callTool("increment", nil)
	assert.Equal(t, "1", r.Content[0].Text)
	assert.Equal(t, map[string]any{"value": json.Number("1")}, r.StructuredContent)
	r = c.callTool("increment", map[string]any{"by": 5})
	assert.Equal(t, "6", r.Content[0].Text)
	r = c.callTool("increment", map[string]any{"by": -2})
	assert.Equal(t, "4", r.Content[0].Text)
	r = c.callTool("get", map[string]any{})
	assert.Equal(t, "4", r.Content[0].Text)
	assert.Equal(t, map[string]any{"value": json.Number("4")}, r.StructuredContent)
	r = c.callTool("pid", nil)
	assert.Equal(t, strconv.Itoa(os.Getpid()), r.Content[0].Text)
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	for _, name := range []string{"tools", "fidelity"} {
		t.Run(name, func(t *testing.T) {
			inR, inW := io.Pipe()
			defer inW.Close()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, name, nil, inR, io.Discard, nil) }()
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(waitTimeout):
				t.Fatal("Run did not return after the context ended")
			}
		})
	}
}
