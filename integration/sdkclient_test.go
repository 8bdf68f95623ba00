package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
)

// sdkTimeout bounds one run of the SDK client script.
const sdkTimeout = 90 * time.Second

// runSDKClient runs node/sdkclient.mjs with the given steps and connection arguments
// (--stdio CMD ARGS... or --http URL) and returns one raw result per step. Its process
// tree is marked with marker and must be gone once it exits.
func runSDKClient(t *testing.T, marker string, steps []map[string]any, args ...string) []json.RawMessage {
	t.Helper()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	stdout, stderr, err := runMarkedNode(t, marker, bytes.NewReader(mustJSON(t, steps)), "sdkclient.mjs", args...)
	require.NoError(t, err, "sdkclient failed; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sdkclient stderr (with the aggregator's, in --stdio mode):\n%s", stderr)
		}
	})

	var out struct {
		Results []json.RawMessage `json:"results"`
		Fatal   string            `json:"fatal"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "sdkclient output: %s", stdout.String())
	require.Empty(t, out.Fatal, "sdkclient could not run its script")
	require.Len(t, out.Results, len(steps))
	return out.Results
}

// runMarkedNode runs node/<script> with args, its process tree marked with
// marker, stdin its input, within sdkTimeout; it returns its output and how
// it ended, once it has exited and no process of its tree is left.
func runMarkedNode(t *testing.T, marker string, stdin io.Reader, script string, args ...string) (stdout *bytes.Buffer, stderr *logBuffer, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(nodeDir, script)}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = markerEnv(marker)
	cmd.Stdin = stdin
	stdout, stderr = new(bytes.Buffer), newLogBuffer()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	assertNoSurvivors(t, marker)
	return stdout, stderr, err
}

// TestSDKClient drives the aggregator with the official TypeScript SDK client, in front
// of three real upstreams at once, and checks that the SDK sees exactly the filtered,
// renamed tools of each and the same call results as a direct connection gets.
// Everything that went through JavaScript is compared with numbers as float64, the only
// precision JSON.parse keeps.
func TestSDKClient(t *testing.T) {
	t.Parallel()
	everything := nodeEntry(t, everythingEntry)
	config := writeConfig(t, `version: 1
servers:
  demo:
    truely-stateless: true
    `+demoServer("tools")+`
    transform: [{prefix: demo_}]
    tools: {blacklist: [big, env]}
  fid:
    truely-stateless: true
    `+demoServer("fidelity")+`
    transform: [{prefix: fx_}]
    tools: {blacklist: [add_tool]}
`+everythingConfig(everything))

	// What the SDK should see, from the upstreams themselves.
	demoDirect := connectDirect(t, nil, binary, "demo-server", "tools")
	everyDirect := connectDirect(t, nil, "node", everything, "stdio")
	wantTools := exportedTools(t, demoDirect.listTools(), []string{"echo", "add", "pid", "slow", "fail"}, "demo_")
	for name, tool := range exportedTools(t, fidelityTools(t), nil, "fx_") {
		if name != "fx_add_tool" {
			wantTools[name] = tool
		}
	}
	for name, tool := range exportedTools(t, everyDirect.listTools(), everythingWhitelist, "ev_") {
		wantTools[name] = tool
	}
	for _, name := range []string{"demo_echo", "fx_rich", "ev_echo"} {
		require.Contains(t, wantTools, name, "expected catalog")
	}

	steps := []map[string]any{
		{"op": "serverInfo"},
		{"op": "listTools"},
		{"op": "callTool", "name": "demo_echo", "arguments": map[string]any{"text": "hello from the SDK"}},
		{"op": "callTool", "name": "demo_add", "arguments": map[string]any{"a": 2, "b": 40}},
		{"op": "callTool", "name": "demo_fail", "arguments": map[string]any{"message": "expected failure"}},
		{"op": "callTool", "name": "fx_rich", "arguments": map[string]any{}},
		{"op": "callTool", "name": "fx_broken", "arguments": map[string]any{}},
		{"op": "callTool", "name": "ev_echo", "arguments": map[string]any{"message": "through two hops"}},
		{"op": "callTool", "name": "ev_get-sum", "arguments": map[string]any{"a": 1.5, "b": 2}},
		{"op": "callTool", "name": "ev_get-tiny-image", "arguments": map[string]any{}},
		{"op": "callTool", "name": "demo_slow", "arguments": map[string]any{"seconds": 0.2, "steps": 4}, "progress": true},
	}
	wantResults := map[int]json.RawMessage{
		2: demoDirect.callToolResult("echo", map[string]any{"text": "hello from the SDK"}),
		3: demoDirect.callToolResult("add", map[string]any{"a": 2, "b": 40}),
		4: demoDirect.callToolResult("fail", map[string]any{"message": "expected failure"}),
		5: demo.FidelityFixture("rich_result.json"),
		7: everyDirect.callToolResult("echo", map[string]any{"message": "through two hops"}),
		8: everyDirect.callToolResult("get-sum", map[string]any{"a": 1.5, "b": 2}),
		9: everyDirect.callToolResult("get-tiny-image", map[string]any{}),
	}

	check := func(t *testing.T, results []json.RawMessage) {
		var info struct {
			ServerVersion struct {
				Name string `json:"name"`
			} `json:"serverVersion"`
		}
		require.NoError(t, json.Unmarshal(results[0], &info))
		assert.Equal(t, "mcp-aggregator", info.ServerVersion.Name)

		var listed struct {
			Tools []json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(results[1], &listed))
		gotTools := upstreamTools(t, listed.Tools)
		assert.Equal(t, decodeAsJavaScript(t, mustJSON(t, wantTools)), decodeAsJavaScript(t, mustJSON(t, gotTools)),
			"the tools the SDK client sees")

		for i, want := range wantResults {
			var got struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			require.NoError(t, json.Unmarshal(results[i], &got))
			if assert.NotEmpty(t, got.Result, "step %d (%s) failed: %s", i, steps[i]["name"], got.Error) {
				assert.Equal(t, decodeAsJavaScript(t, want), decodeAsJavaScript(t, got.Result), "result of %s", steps[i]["name"])
			}
		}

		var broken struct {
			Error json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal(results[6], &broken))
		// The SDK's McpError prefixes the message with the code.
		wantErr := decodeAsJavaScript(t, demo.FidelityFixture("error.json")).(map[string]any)
		wantErr["message"] = fmt.Sprintf("MCP error %v: %v", wantErr["code"], wantErr["message"])
		assert.Equal(t, wantErr, decodeAsJavaScript(t, broken.Error), "the JSON-RPC error of fx_broken")

		var slow struct {
			Result   json.RawMessage   `json:"result"`
			Progress []json.RawMessage `json:"progress"`
		}
		require.NoError(t, json.Unmarshal(results[10], &slow))
		assert.Equal(t, "done after 4 steps", firstText(t, slow.Result))
		if assert.Len(t, slow.Progress, 4, "progress the SDK received for demo_slow") {
			for i, p := range slow.Progress {
				params := decodeObject(t, p)
				assert.NotNil(t, params["progressToken"])
				assert.Equal(t, json.Number(strconv.Itoa(i+1)), params["progress"])
			}
		}
	}

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		// The SDK starts the aggregator itself and lists at once, while the
		// upstreams may still be starting. tools/list waits a few seconds for
		// them; a client that got a partial list hears tools/list_changed when
		// the rest arrive (one that got the whole list hears nothing), so list
		// again until every tool is there.
		stdioSteps := slices.Clone(steps)
		stdioSteps[1] = map[string]any{"op": "listTools", "atLeast": len(wantTools) + len(adminTools), "waitMs": 20000}
		results := runSDKClient(t, newMarker(), stdioSteps, "--stdio", binary, "serve", "--config", config)
		check(t, results)
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{config}})
		a.waitLoaded()
		results := runSDKClient(t, newMarker(), steps, "--http", a.url)
		check(t, results)
	})
}
