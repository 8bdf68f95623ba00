package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What flows alongside a request bridged between the protocol generations:
// progress under the caller's own token, cancellation reaching the upstream,
// request-scoped log messages at the caller's level, and a 2026-07-28
// upstream's list changes (subscriptions/listen).

// modernExchange is one 2026-07-28 request over HTTP whose messages are read
// as they come.
type modernExchange struct {
	t      *testing.T
	cancel context.CancelFunc
	msgs   chan map[string]any // every message of the response, in order; closed at the end
}

// modernOpen sends a sessionless request (capabilities caps, the given
// progress token and log level when not empty) and reads its response stream
// in the background. The lease key is "flow", or lease when given.
func modernOpen(t *testing.T, url, method, name string, params map[string]any, caps []string, token, level string, lease ...string) *modernExchange {
	t.Helper()
	return modernOpenAs(t, "", url, method, name, params, caps, token, level, lease...)
}

// modernOpenAs is modernOpen presenting bearer, a static token of
// http.auth ("" presents none).
func modernOpenAs(t *testing.T, bearer, url, method, name string, params map[string]any, caps []string, token, level string, lease ...string) *modernExchange {
	t.Helper()
	capabilities := map[string]any{}
	for _, c := range caps {
		capabilities[c] = map[string]any{}
	}
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": capabilities,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "bridge-flow-test", "version": "1.0.0"},
		"mcp-aggregator/lease":                       "flow",
	}
	if len(lease) > 0 {
		meta["mcp-aggregator/lease"] = lease[0]
	}
	if token != "" {
		meta["progressToken"] = token
	}
	if level != "" {
		meta["io.modelcontextprotocol/logLevel"] = level
	}
	params["_meta"] = meta
	body := mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	req, err := newModernRequest(ctx, url, bearer, method, name, body)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	x := &modernExchange{t: t, cancel: cancel, msgs: make(chan map[string]any, 64)}
	t.Cleanup(cancel)
	go func() {
		defer close(x.msgs)
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			raw, _ := io.ReadAll(resp.Body)
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var m map[string]any
			if dec.Decode(&m) == nil {
				x.msgs <- m
			}
			return
		}
		_ = readSSE(resp.Body, func(d []byte) bool {
			dec := json.NewDecoder(bytes.NewReader(d))
			dec.UseNumber()
			var m map[string]any
			if dec.Decode(&m) != nil {
				return true
			}
			x.msgs <- m
			return m["id"] == nil
		})
	}()
	return x
}

// next is the exchange's next message; it fails the test when the stream ends first.
func (x *modernExchange) next() map[string]any {
	x.t.Helper()
	select {
	case m, ok := <-x.msgs:
		require.True(x.t, ok, "the response stream ended early")
		return m
	case <-time.After(callTimeout):
		x.t.Fatal("no message within the call timeout")
		return nil
	}
}

// until reads messages up to the response, which it returns with the
// notifications before it.
func (x *modernExchange) until() (notes []map[string]any, resp map[string]any) {
	x.t.Helper()
	for {
		m := x.next()
		if m["id"] != nil {
			return notes, m
		}
		notes = append(notes, m)
	}
}

// progressMessages are the progress notifications among notes, as "token:message".
func progressMessages(notes []map[string]any) []string {
	var out []string
	for _, n := range notes {
		if n["method"] == "notifications/progress" {
			p := n["params"].(map[string]any)
			out = append(out, fmt.Sprint(p["progressToken"], ":", p["message"]))
		}
	}
	return out
}

// logsOf are the data of the log messages among notes.
func logsOf(notes []map[string]any) []string {
	var out []string
	for _, n := range notes {
		if n["method"] == "notifications/message" {
			out = append(out, fmt.Sprint(n["params"].(map[string]any)["data"]))
		}
	}
	return out
}

// TestBridgeModernClientProgressAndCancel: a 2026-07-28 client calls tools of an
// SDK 1.x server that reports progress before and after asking for input: each
// request of the client sees the progress made while it was the one waiting,
// under its own token. A retry the client abandons while the upstream works
// cancels the upstream's call (its AbortSignal fires).
func TestBridgeModernClientProgressAndCancel(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, askServerConfig(t, ""))
	a.waitLoaded()
	caps := []string{"elicitation"}

	notes, resp := modernOpen(t, a.url, "tools/call", "progress_ask", map[string]any{"name": "progress_ask", "arguments": map[string]any{}}, caps, "first", "").until()
	state, key := inputState(t, resp)
	assert.Equal(t, []string{"first:before"}, progressMessages(notes))
	notes, resp = modernOpen(t, a.url, "tools/call", "progress_ask", map[string]any{"name": "progress_ask", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Ada"})}}, caps, "second", "").until()
	assert.Equal(t, []string{"second:after"}, progressMessages(notes), "the retry sees the progress made after the answer, under its token")
	assert.Equal(t, "hello Ada", modernResultText(t, resp))

	// Cancellation: the retry is abandoned while the upstream works on.
	_, resp = modernOpen(t, a.url, "tools/call", "ask_then_wait", map[string]any{"name": "ask_then_wait", "arguments": map[string]any{}}, caps, "third", "").until()
	state, key = inputState(t, resp)
	retry := modernOpen(t, a.url, "tools/call", "ask_then_wait", map[string]any{"name": "ask_then_wait", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Bo"})}}, caps, "fourth", "")
	waiting := retry.next()
	require.Equal(t, "notifications/progress", waiting["method"], "%v", waiting)
	assert.Equal(t, []string{"fourth:waiting"}, progressMessages([]map[string]any{waiting}))
	assert.False(t, a.log.containsLine("askserver: cancelled ask_then_wait"))
	retry.cancel()
	_, seen := a.log.waitLine(func(line string) bool { return strings.Contains(line, "askserver: cancelled ask_then_wait") }, 30*time.Second, a.exited)
	require.True(t, seen, "the upstream never saw its call cancelled; log:\n%s", a.log)
	// And the exchange is gone: its state is refused.
	_, resp = modernOpen(t, a.url, "tools/call", "ask_then_wait", map[string]any{"name": "ask_then_wait", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Bo"})}}, caps, "", "").until()
	refusedBecause(t, resp)
}

// oldClient is a Go SDK client session on protocol 2025-11-25 that answers
// elicitation with a name and records progress, log messages and list changes.
type oldClient struct {
	session *mcp.ClientSession
	mu      sync.Mutex
	events  []string // "progress:<token>:<message>", "log:<data>", "tools-changed"
	changed chan struct{}
}

func (c *oldClient) record(event string) {
	c.mu.Lock()
	c.events = append(c.events, event)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// waitFor waits until an event satisfies match, and returns the events so far.
func (c *oldClient) waitFor(t *testing.T, what string, match func(string) bool) []string {
	t.Helper()
	deadline := time.NewTimer(callTimeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		events, changed := slices.Clone(c.events), c.changed
		c.mu.Unlock()
		if slices.ContainsFunc(events, match) {
			return events
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: not within %s; events: %v", what, callTimeout, events)
		}
	}
}

// filtered are the events with prefix, the prefix taken off.
func (c *oldClient) filtered(prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.events {
		if rest, ok := strings.CutPrefix(e, prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// progressAcrossInput calls inputserver's progress_input with the progress
// token given and checks that it ends, greeting Ada, and that the client
// heard its progress before and after the input round under that token;
// failArgs say what to show when the call fails.
func (c *oldClient) progressAcrossInput(t *testing.T, ctx context.Context, token string, failArgs ...any) {
	t.Helper()
	params := &mcp.CallToolParams{Name: "progress_input", Arguments: map[string]any{}}
	params.SetProgressToken(token)
	res, err := c.session.CallTool(ctx, params)
	require.NoError(t, err, failArgs...)
	assert.Equal(t, "hello Ada", toolText(t, res))
	c.waitFor(t, "the progress after the input round", func(e string) bool { return e == "progress:"+token+":after" })
	assert.Equal(t, []string{token + ":before", token + ":after"}, c.filtered("progress:"))
}

// startWaitingCall calls wait_after_input, whose upstream waits after the
// client's input, and returns once the call reports it waits: cancel cancels
// the call, and done gets what the call returned.
func (c *oldClient) startWaitingCall(ctx context.Context, t *testing.T) (cancel func(), done <-chan error) {
	t.Helper()
	callCtx, callCancel := context.WithCancel(ctx)
	params := &mcp.CallToolParams{Name: "wait_after_input", Arguments: map[string]any{}}
	params.SetProgressToken("wait")
	returned := make(chan error, 1)
	go func() {
		_, err := c.session.CallTool(callCtx, params)
		returned <- err
	}()
	c.waitFor(t, "the progress of the waiting round", func(e string) bool { return e == "progress:wait:waiting" })
	return callCancel, returned
}

func connectOldClient(t *testing.T, url string) *oldClient {
	t.Helper()
	c := &oldClient{changed: make(chan struct{})}
	client := mcp.NewClient(&mcp.Implementation{Name: "bridge-flow-old-client", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.record(fmt.Sprint("progress:", req.Params.ProgressToken, ":", req.Params.Message))
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.record(fmt.Sprint("log:", req.Params.Data))
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { c.record("tools-changed") },
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.record("updated:" + req.Params.URI)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	c.session = session
	return c
}

// modernUpstream puts node/inputserver.mjs behind an HTTP aggregator, with
// extra lines in its server entry.
func modernUpstream(t *testing.T, extra ...string) (*aggregator, *logBuffer) {
	t.Helper()
	url, serverLog := startInputServer(t)
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  modern:
    url: %s
    protocol: "2026-07-28"
%s`, url, strings.Join(extra, "")))
	a.waitLoaded()
	return a, serverLog
}

// toolText is the text of a tool result's first content item.
func toolText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, res.Content)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "%T", res.Content[0])
	return text.Text
}

// TestBridgeOldClientProgressAndCancel: a 2025-11-25 client (Go SDK) calls a
// 2026-07-28 upstream (SDK v2 server) that reports progress in each of its
// input_required rounds: the client sees all of it under its own token. A call
// the client cancels while the upstream works cancels the upstream's request.
func TestBridgeOldClientProgressAndCancel(t *testing.T) {
	t.Parallel()
	a, serverLog := modernUpstream(t)
	c := connectOldClient(t, a.url)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	c.progressAcrossInput(t, ctx, "mine", "server log:\n%s\naggregator log:\n%s", serverLog, a.log)

	// Cancellation after the input round, while the upstream waits.
	callCancel, done := c.startWaitingCall(ctx, t)
	assert.False(t, serverLog.containsLine("inputserver: cancelled wait_after_input"))
	callCancel()
	_, seen := serverLog.waitLine(func(line string) bool { return strings.Contains(line, "inputserver: cancelled wait_after_input") }, 30*time.Second, nil)
	require.True(t, seen, "the upstream never saw its request cancelled; server log:\n%s\naggregator log:\n%s", serverLog, a.log)
	require.Error(t, <-done)
}

// TestBridgeLogLevelToModernUpstream: a 2026-07-28 upstream logs for a request
// only at the level the request names; the aggregator names the caller's, a
// 2025-11-25 client's session level or a 2026-07-28 client's own, and relays
// the messages to the caller.
func TestBridgeLogLevelToModernUpstream(t *testing.T) {
	t.Parallel()
	a, serverLog := modernUpstream(t)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	// A 2025-11-25 client at debug: everything (the upstream sends nothing
	// for a request that names no level, so debug reached it).
	c := connectOldClient(t, a.url)
	require.NoError(t, c.session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}))
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: "log_levels", Arguments: map[string]any{}})
	require.NoError(t, err, "server log:\n%s", serverLog)
	assert.Equal(t, "logged", toolText(t, res))
	c.waitFor(t, "the warning", func(e string) bool { return e == "log:w" })
	assert.Equal(t, []string{"d", "i", "w"}, c.filtered("log:"))

	// A 2025-11-25 client that never set a level: the default, info.
	c2 := connectOldClient(t, a.url)
	_, err = c2.session.CallTool(ctx, &mcp.CallToolParams{Name: "log_levels", Arguments: map[string]any{}})
	require.NoError(t, err)
	c2.waitFor(t, "the warning", func(e string) bool { return e == "log:w" })
	assert.Equal(t, []string{"i", "w"}, c2.filtered("log:"))

	// 2026-07-28 clients: their own level per request, on the request's stream;
	// none without one.
	for level, want := range map[string][]string{"debug": {"d", "i", "w"}, "warning": {"w"}, "": nil} {
		notes, resp := modernOpen(t, a.url, "tools/call", "log_levels", map[string]any{"name": "log_levels", "arguments": map[string]any{}}, nil, "", level).until()
		require.NotNil(t, resp["result"], "%v", resp)
		assert.Equal(t, want, logsOf(notes), "level %q", level)
	}
}

// TestBridgeModernUpstreamListChanged: a 2026-07-28 upstream announces list
// changes only on a subscriptions/listen stream; the aggregator keeps one open,
// so a tool the upstream adds at runtime reaches clients with
// notifications/tools/list_changed and in tools/list.
func TestBridgeModernUpstreamListChanged(t *testing.T) {
	t.Parallel()
	a, serverLog := modernUpstream(t)
	c := connectOldClient(t, a.url)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	names := func() []string {
		list, err := c.session.ListTools(ctx, nil)
		require.NoError(t, err)
		var out []string
		for _, tool := range list.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	require.NotContains(t, names(), "extra_tool")
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: "add_tool", Arguments: map[string]any{}})
	require.NoError(t, err, "server log:\n%s", serverLog)
	assert.Equal(t, "added", toolText(t, res))
	c.waitFor(t, "tools/list_changed", func(e string) bool { return e == "tools-changed" })
	assert.Contains(t, names(), "extra_tool", "aggregator log:\n%s", a.log)
	res, err = c.session.CallTool(ctx, &mcp.CallToolParams{Name: "extra_tool", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "extra", toolText(t, res))

	// resources/subscribe, which that generation does not have, becomes a
	// URI on the aggregator's subscriptions/listen stream.
	require.NoError(t, c.session.Subscribe(ctx, &mcp.SubscribeParams{URI: "input://note"}), "aggregator log:\n%s", a.log)
	res, err = c.session.CallTool(ctx, &mcp.CallToolParams{Name: "touch_note", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "touched", toolText(t, res))
	c.waitFor(t, "resources/updated", func(e string) bool { return e == "updated:input://note" })
}

// TestBridgeSharedStdioAttribution: one shared stdio instance, two calls of
// one 2026-07-28 client held open at once. A stdio upstream's request does
// not say which call it belongs to; the first call waits for its answer
// already, so the second's is the second call's. Answered in reverse order,
// each call gets its own answer, and a call of a third client afterwards
// gets its round too.
func TestBridgeSharedStdioAttribution(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, askServerConfig(t, "    truely-stateless: true\n"))
	a.waitLoaded()
	caps := []string{"elicitation"}
	call := func(lease string, extra map[string]any) map[string]any {
		p := map[string]any{"name": "elicit_name", "arguments": map[string]any{}}
		for k, v := range extra {
			p[k] = v
		}
		_, resp := modernOpen(t, a.url, "tools/call", "elicit_name", p, caps, "", "", lease).until()
		return resp
	}
	answer := func(lease, state, key, name string) string {
		resp := call(lease, map[string]any{"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": name})}})
		return modernResultText(t, resp)
	}
	firstState, firstKey := inputState(t, call("conv-a", nil))
	secondState, secondKey := inputState(t, call("conv-a", nil))
	assert.Equal(t, "hello Bea", answer("conv-a", secondState, secondKey, "Bea"), "the second call has its own answer")
	assert.Equal(t, "hello Al", answer("conv-a", firstState, firstKey, "Al"), "the first call has its own answer")
	assert.False(t, a.log.containsLine("askserver: elicit_name got no answer"), "%s", a.log)

	state, key := inputState(t, call("conv-c", nil))
	assert.Equal(t, "hello Cy", answer("conv-c", state, key, "Cy"), "a later client's round works")
}

// TestBridgeSharedStdioAttributionPrincipals: one shared stdio instance and
// two clients (static tokens). While alice's call waits for her answer,
// bob's call asks too: his request is not hers to see, nor hers his, so
// the upstream's request is refused with an error that says how to serve
// both (lease the server); alice's call completes with her answer, and bob,
// alone on the instance, gets his round.
func TestBridgeSharedStdioAttributionPrincipals(t *testing.T) {
	t.Parallel()
	alice, bob := randomToken(t), randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, "http:\n  auth:\n    tokens:\n      alice: { env: ALICE_TOKEN }\n      bob: { env: BOB_TOKEN }\n"+
			askServerConfig(t, "    truely-stateless: true\n"))},
		env: []string{"ALICE_TOKEN=" + alice, "BOB_TOKEN=" + bob},
	})
	a.waitLoaded()
	caps := []string{"elicitation"}
	call := func(bearer string, extra map[string]any) map[string]any {
		p := map[string]any{"name": "elicit_name", "arguments": map[string]any{}}
		for k, v := range extra {
			p[k] = v
		}
		_, resp := modernOpenAs(t, bearer, a.url, "tools/call", "elicit_name", p, caps, "", "").until()
		return resp
	}
	state, key := inputState(t, call(alice, nil))

	refused := call(bob, nil)
	result, ok := refused["result"].(map[string]any)
	require.True(t, ok, "%v", refused)
	assert.Equal(t, true, result["isError"], "bob is not asked alice's question, nor she his: %v", result)
	text := result["content"].([]any)[0].(map[string]any)["text"].(string)
	assert.Contains(t, text, "elicitation/create cannot be attributed")
	assert.Contains(t, text, "2 requests of 2 clients")
	assert.Contains(t, text, "lease the server (truely-stateless: false")

	done := call(alice, map[string]any{"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Al"})}})
	assert.Equal(t, "hello Al", modernResultText(t, done))

	state, key = inputState(t, call(bob, nil))
	done = call(bob, map[string]any{"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Bo"})}})
	assert.Equal(t, "hello Bo", modernResultText(t, done))
}

// TestBridgeModernStdioUpstream: a 2026-07-28 upstream over stdio (SDK v2's
// serveStdio, that generation only): a 2025-11-25 client's calls get their
// input rounds, progress, log messages at its level and cancellation, and a
// 2026-07-28 client's its own input_required rounds.
func TestBridgeModernStdioUpstream(t *testing.T) {
	t.Parallel()
	nodeEntry(t, "@modelcontextprotocol/server/package.json")
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  modern:
    command: node
    args: [%q, "--stdio"]
    protocol: "2026-07-28"
`, filepath.Join(nodeDir, "inputserver.mjs")))
	a.waitLoaded()
	require.True(t, a.log.containsLine(`msg="server ready" server=modern`), "%s", a.log)
	c := connectOldClient(t, a.url)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	c.progressAcrossInput(t, ctx, "stdio", "%s", a.log)

	require.NoError(t, c.session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}))
	_, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: "log_levels", Arguments: map[string]any{}})
	require.NoError(t, err)
	c.waitFor(t, "the warning", func(e string) bool { return e == "log:w" })
	assert.Equal(t, []string{"d", "i", "w"}, c.filtered("log:"))

	callCancel, done := c.startWaitingCall(ctx, t)
	callCancel()
	_, seen := a.log.waitLine(func(line string) bool { return strings.Contains(line, "inputserver: cancelled wait_after_input") }, 30*time.Second, a.exited)
	require.True(t, seen, "the upstream never saw its request cancelled; log:\n%s", a.log)
	require.Error(t, <-done)

	// A 2026-07-28 client: the aggregator's own rounds in front of the upstream's.
	_, resp := modernOpen(t, a.url, "tools/call", "confirm_name", map[string]any{"name": "confirm_name", "arguments": map[string]any{}}, []string{"elicitation"}, "", "").until()
	state, key := inputState(t, resp)
	_, resp = modernOpen(t, a.url, "tools/call", "confirm_name", map[string]any{"name": "confirm_name", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Grace"})}}, []string{"elicitation"}, "", "").until()
	assert.Equal(t, "hello Grace", modernResultText(t, resp))
}

// modernResultText is the text of the first content item of resp's result,
// failing the test when resp, a 2026-07-28 response, has no result.
func modernResultText(t *testing.T, resp map[string]any) string {
	t.Helper()
	result, ok := resp["result"].(map[string]any)
	require.True(t, ok, "%v", resp)
	text, _ := result["content"].([]any)[0].(map[string]any)["text"].(string)
	return text
}

// TestBridgeModernUpstreamConcurrentLogs: log messages of two requests running
// at once on one shared instance of a 2026-07-28 HTTP upstream each reach
// the request they came with (they come on its response stream), and only it.
func TestBridgeModernUpstreamConcurrentLogs(t *testing.T) {
	t.Parallel()
	a, _ := modernUpstream(t, "    truely-stateless: true\n")
	tags := []string{"alpha", "beta", "gamma"}
	exchanges := make([]*modernExchange, len(tags))
	for i, tag := range tags {
		exchanges[i] = modernOpen(t, a.url, "tools/call", "log_tagged", map[string]any{"name": "log_tagged", "arguments": map[string]any{"tag": tag}}, nil, "", "info", "logs-"+tag)
	}
	for i, tag := range tags {
		notes, resp := exchanges[i].until()
		require.NotNil(t, resp["result"], "%v", resp)
		assert.Equal(t, []string{tag + "-1", tag + "-2"}, logsOf(notes), "request %q", tag)
	}
}

// TestBridgeModernClientModernUpstreamProgress: a 2026-07-28 client of a
// 2026-07-28 upstream that asks for input: the aggregator's rounds stand in
// front of the upstream's, and each request of the client sees the progress
// the upstream reported while it waited, under its own token.
func TestBridgeModernClientModernUpstreamProgress(t *testing.T) {
	t.Parallel()
	a, _ := modernUpstream(t)
	caps := []string{"elicitation"}
	notes, resp := modernOpen(t, a.url, "tools/call", "progress_input", map[string]any{"name": "progress_input", "arguments": map[string]any{}}, caps, "one", "").until()
	state, key := inputState(t, resp)
	assert.True(t, strings.HasPrefix(state, "mcpagg1."), "the aggregator's own state: %s", state)
	assert.Equal(t, []string{"one:before"}, progressMessages(notes))
	notes, resp = modernOpen(t, a.url, "tools/call", "progress_input", map[string]any{"name": "progress_input", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "Lin"})}}, caps, "two", "").until()
	assert.Equal(t, []string{"two:after"}, progressMessages(notes))
	assert.Equal(t, "hello Lin", modernResultText(t, resp))
}

// TestBridgeOldClientModernUpstreamTimeout: the call's timeout bounds all of a
// 2026-07-28 upstream's rounds: past it the client gets an error saying so and
// the upstream's request is cancelled.
func TestBridgeOldClientModernUpstreamTimeout(t *testing.T) {
	t.Parallel()
	a, serverLog := modernUpstream(t, "    request_timeout: 2s\n")
	c := connectOldClient(t, a.url)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	start := time.Now()
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: "wait_after_input", Arguments: map[string]any{}})
	var text string
	if err != nil {
		text = err.Error()
	} else {
		require.True(t, res.IsError, "a result past the timeout: %v", res)
		text = toolText(t, res)
	}
	assert.Contains(t, text, "no result within 2s")
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Second)
	_, seen := serverLog.waitLine(func(line string) bool { return strings.Contains(line, "inputserver: cancelled wait_after_input") }, 30*time.Second, nil)
	require.True(t, seen, "the upstream never saw its request cancelled; server log:\n%s\naggregator log:\n%s", serverLog, a.log)
}
