package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdk2Entry is the package.json of the TypeScript SDK v2 client package.
const sdk2Entry = "@modelcontextprotocol/client/package.json"

// sdk2Run is one run of node/sdk2client.mjs: the TypeScript SDK v2 client in its
// 2026-07-28 mode, working through a script of steps.
type sdk2Run struct {
	t      *testing.T
	marker string
	stdout *logBuffer
	stderr *logBuffer // the script's marks and, with --stdio, the aggregator's log
	done   chan struct{}
	err    error // valid after done
}

// startSDK2Client starts node/sdk2client.mjs with the given steps and connection
// arguments (--stdio CMD ARGS... or --http URL). Its process tree is marked with a
// marker of its own.
func startSDK2Client(t *testing.T, steps []map[string]any, args ...string) *sdk2Run {
	t.Helper()
	nodeEntry(t, sdk2Entry)
	r := &sdk2Run{t: t, marker: newMarker(), stdout: newLogBuffer(), stderr: newLogBuffer(), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(nodeDir, "sdk2client.mjs")}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = markerEnv(r.marker)
	cmd.Stdin = bytes.NewReader(mustJSON(t, steps))
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start())
	go func() {
		r.err = cmd.Wait()
		cancel()
		close(r.done)
	}()
	t.Cleanup(func() {
		<-r.done
		if t.Failed() {
			t.Logf("sdk2client stderr (with the aggregator's, in --stdio mode):\n%s", r.stderr)
		}
	})
	return r
}

// waitMark waits until the script has reached its mark step with this text.
func (r *sdk2Run) waitMark(text string) {
	r.t.Helper()
	_, ok := r.stderr.waitLine(func(line string) bool { return line == "sdk2client: mark "+text }, sdkTimeout, r.done)
	require.True(r.t, ok, "sdk2client never reached mark %q; stdout:\n%s\nstderr:\n%s", text, r.stdout, r.stderr)
}

// sdk2Output is what the script writes to stdout.
type sdk2Output struct {
	Results []json.RawMessage `json:"results"`
	CloseMs int               `json:"closeMs"` // how long client.close() took
	Fatal   string            `json:"fatal"`
}

// output waits for the script to end and returns its output, one raw result per step.
func (r *sdk2Run) output(steps int) sdk2Output {
	r.t.Helper()
	<-r.done
	assertNoSurvivors(r.t, r.marker)
	require.NoError(r.t, r.err, "sdk2client failed; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	var out sdk2Output
	require.NoError(r.t, json.Unmarshal([]byte(r.stdout.String()), &out), "sdk2client output: %s", r.stdout)
	require.Empty(r.t, out.Fatal, "sdk2client could not run its script; stderr:\n%s", r.stderr)
	require.Len(r.t, out.Results, steps)
	return out
}

// sdk2Step decodes one step's result, failing on a step that threw.
func sdk2Step[T any](t *testing.T, raw json.RawMessage, what string) T {
	t.Helper()
	var failed struct {
		Error json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &failed))
	require.Empty(t, failed.Error, "%s: the SDK threw", what)
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), "%s: %s", what, raw)
	return v
}

// withoutMember returns the JSON object raw, decoded as JavaScript would, less one member.
func withoutMember(t *testing.T, raw []byte, name string) map[string]any {
	t.Helper()
	obj, ok := decodeAsJavaScript(t, raw).(map[string]any)
	require.True(t, ok, "not a JSON object: %.300s", raw)
	delete(obj, name)
	return obj
}

// withoutResultProtocol returns the JSON object raw, decoded as JavaScript
// would, less what protocol 2026-07-28 adds to every result the aggregator
// sends: resultType, and its own name in _meta (an empty _meta goes too).
// It returns that name as well (nil: none).
func withoutResultProtocol(t *testing.T, raw []byte) (obj map[string]any, serverInfo any) {
	t.Helper()
	obj = withoutMember(t, raw, "resultType")
	meta, ok := obj["_meta"].(map[string]any)
	if !ok {
		return obj, nil
	}
	serverInfo = meta[serverInfoKey]
	delete(meta, serverInfoKey)
	if len(meta) == 0 {
		delete(obj, "_meta")
	}
	return obj, serverInfo
}

// assertAggregatorInfo asserts that info, a serverInfo decoded as
// JavaScript would, names the aggregator.
func assertAggregatorInfo(t *testing.T, info any, msgAndArgs ...any) {
	t.Helper()
	m, _ := info.(map[string]any)
	if assert.NotNil(t, m, msgAndArgs...) {
		assert.Equal(t, "mcp-aggregator", m["name"], msgAndArgs...)
		assert.NotEmpty(t, m["version"], msgAndArgs...)
	}
}

// TestSDK2Client: the official TypeScript SDK v2 client (@modelcontextprotocol/client),
// pinned to protocol 2026-07-28, over stdio and streamable HTTP: it connects with
// server/discover, lists the tools (its own validation requires resultType, ttlMs and
// cacheScope: "Invalid result for tools/list: ttlMs expected number, received
// undefined" was the failure), calls them with the upstream's own results, and its
// listChanged handler fires once, on the subscriptions/listen stream, when a config
// reload changes the catalog.
func TestSDK2Client(t *testing.T) {
	t.Parallel()
	nodeEntry(t, sdk2Entry)
	// What the demo upstream itself sends.
	direct := connectDirect(t, nil, binary, "demo-server", "tools")
	wantTools := map[string]any{}
	for _, raw := range direct.listTools() {
		tool, _ := decodeAsJavaScript(t, raw).(map[string]any)
		wantTools[tool["name"].(string)] = tool
	}
	echoArgs := map[string]any{"text": "hello from the TypeScript SDK v2"}
	addArgs := map[string]any{"a": 2, "b": 40}
	wantEcho := direct.callToolResult("echo", echoArgs)
	wantAdd := direct.callToolResult("add", addArgs)

	steps := []map[string]any{
		{"op": "serverInfo"},
		{"op": "listTools"},
		{"op": "callTool", "name": "echo", "arguments": echoArgs},
		{"op": "callTool", "name": "add", "arguments": addArgs},
		{"op": "mark", "text": "ready"},
		// The SDK re-lists before its callback fires, so a callback for the catalog's
		// first load may still come after the mark: wait for the one with the new tool.
		{"op": "waitListChanged", "timeoutMs": reloadWait.Milliseconds(), "fresh": true, "includes": "pid"},
		{"op": "listTools"},
		{"op": "callTool", "name": "pid", "arguments": map[string]any{}},
		{"op": "notifications"},
	}
	before, after := reloadConfig("echo, add"), reloadConfig("echo, add, pid")

	for _, tr := range []transport{stdioTransport, httpTransport} {
		t.Run(string(tr), func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, before)
			var run *sdk2Run
			var a *aggregator
			switch tr {
			case stdioTransport:
				// The SDK starts the aggregator (twice: its server/discover probe runs on a
				// sibling process it then disposes of), whose stderr is the script's.
				run = startSDK2Client(t, steps, "--stdio", binary, "serve", "--log-level", "debug", "--config", path)
				a = &aggregator{t: t, transport: tr, log: run.stderr, exited: run.done}
			case httpTransport:
				a = startAggregator(t, tr, aggregatorOptions{configs: []string{path}})
				a.waitLoaded()
				run = startSDK2Client(t, steps, "--http", a.url)
			}
			rig := &reloadRig{t: t, a: a, path: path}
			run.waitMark("ready")
			a.waitLoaded()
			rig.save(after)
			assert.Contains(t, rig.waitReload(), "changed=true")
			out := run.output(len(steps))
			results := out.Results
			if tr == stdioTransport {
				// The SDK closes the aggregator's stdin and sends SIGTERM 2 s later; an
				// aggregator whose input closed exits by itself well before.
				assert.Less(t, out.CloseMs, 2000, "the SDK's close took %d ms: the aggregator did not exit when its stdin closed", out.CloseMs)
			}

			// Connected in the 2026-07-28 era, subscribed to tools/list_changed.
			info := sdk2Step[struct {
				ProtocolVersion string `json:"protocolVersion"`
				Era             string `json:"era"`
				ServerVersion   struct {
					Name string `json:"name"`
				} `json:"serverVersion"`
				Capabilities struct {
					Tools struct {
						ListChanged bool `json:"listChanged"`
					} `json:"tools"`
				} `json:"capabilities"`
				Subscription map[string]any `json:"subscription"`
			}](t, results[0], "serverInfo")
			assert.Equal(t, modernVersion, info.ProtocolVersion)
			assert.Equal(t, "modern", info.Era)
			assert.Equal(t, "mcp-aggregator", info.ServerVersion.Name)
			assert.True(t, info.Capabilities.Tools.ListChanged, "tools.listChanged")
			assert.Equal(t, map[string]any{"toolsListChanged": true}, info.Subscription, "the filter the listen stream was acknowledged with")

			// tools/list passed the SDK's validation and carries what the upstream sent.
			type listing struct {
				Tools []map[string]any  `json:"tools"`
				Wire  []json.RawMessage `json:"wire"`
			}
			listed := sdk2Step[listing](t, results[1], "listTools")
			var names []string
			sdkTools := map[string]any{}
			for _, tool := range listed.Tools {
				names = append(names, tool["name"].(string))
				sdkTools[tool["name"].(string)] = tool
			}
			assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "add"}, names, "the tools the SDK returned")
			for _, name := range []string{"echo", "add"} {
				assert.Equal(t, wantTools[name], sdkTools[name], "tool %s as the SDK returned it", name)
			}
			// The SDK may have listed on its own meanwhile (its listChanged handler
			// re-lists when the catalog loads): every response counts.
			require.NotEmpty(t, listed.Wire, "tools/list responses")
			for _, raw := range listed.Wire {
				page := decodeAsJavaScript(t, raw).(map[string]any)
				assert.Equal(t, "complete", page["resultType"])
				assert.IsType(t, float64(0), page["ttlMs"], "ttlMs")
				assert.Contains(t, []any{"public", "private"}, page["cacheScope"], "cacheScope")
				wireTools := map[string]any{}
				list, _ := page["tools"].([]any)
				for _, tool := range list {
					tool, _ := tool.(map[string]any)
					wireTools[tool["name"].(string)] = tool
				}
				for _, name := range []string{"echo", "add"} {
					assert.Equal(t, wantTools[name], wireTools[name], "tool %s as sent to the SDK", name)
				}
			}

			// tools/call: the upstream's result, plus the resultType 2026-07-28 requires.
			type call struct {
				Result json.RawMessage `json:"result"`
				Wire   json.RawMessage `json:"wire"`
			}
			for i, want := range map[int]json.RawMessage{2: wantEcho, 3: wantAdd} {
				got := sdk2Step[call](t, results[i], steps[i]["name"].(string))
				assert.Equal(t, "complete", decodeAsJavaScript(t, got.Wire).(map[string]any)["resultType"], "resultType of %s", steps[i]["name"])
				for what, raw := range map[string]json.RawMessage{"as sent to the SDK": got.Wire, "as the SDK returned it": got.Result} {
					result, info := withoutResultProtocol(t, raw)
					assert.Equal(t, decodeAsJavaScript(t, want), any(result), "%s %s", steps[i]["name"], what)
					assertAggregatorInfo(t, info, "%s %s names the aggregator in _meta", steps[i]["name"], what)
				}
			}

			// The reload: the SDK's listChanged handler fired and re-listed.
			var mark struct {
				Notifications int `json:"notifications"`
			}
			require.NoError(t, json.Unmarshal(results[4], &mark))
			changed := sdk2Step[struct {
				ListChanged  bool     `json:"listChanged"`
				Tools        []string `json:"tools"`
				RefreshError string   `json:"refreshError"`
			}](t, results[5], "waitListChanged")
			require.True(t, changed.ListChanged, "the SDK's listChanged handler did not fire within %s of the reload", reloadWait)
			assert.Empty(t, changed.RefreshError, "the SDK's re-list after list_changed")
			assert.Contains(t, changed.Tools, "pid", "the list the SDK fetched for its handler")
			relisted := sdk2Step[listing](t, results[6], "listTools after the reload")
			names = names[:0]
			for _, tool := range relisted.Tools {
				names = append(names, tool["name"].(string))
			}
			assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "add", "pid"}, names, "the tools after the reload")
			pid := sdk2Step[call](t, results[7], "pid")
			var pidResult struct {
				IsError    bool `json:"isError"`
				Structured struct {
					PID int `json:"pid"`
				} `json:"structuredContent"`
			}
			require.NoError(t, json.Unmarshal(pid.Result, &pidResult))
			assert.False(t, pidResult.IsError)
			assert.NotZero(t, pidResult.Structured.PID)

			// Every list_changed is tagged with the listen stream's id, and the reload
			// sent exactly one.
			notes := sdk2Step[struct {
				Notifications []notification `json:"notifications"`
			}](t, results[8], "notifications").Notifications
			var ack, listChanged int
			for i, n := range notes {
				switch n.Method {
				case "notifications/subscriptions/acknowledged":
					ack++
				case "notifications/tools/list_changed":
					assert.Contains(t, string(n.Params), metaSubscriptionID,
						"a 2026-07-28 client got a tools/list_changed outside its subscription: %s", n.Params)
					if i >= mark.Notifications {
						listChanged++
					}
				}
			}
			assert.Equal(t, 1, ack, "subscription acknowledgements")
			assert.Equal(t, 1, listChanged, "tools/list_changed notifications after the reload: %s", strings.TrimSpace(string(mustJSON(t, notes))))
		})
	}
}
