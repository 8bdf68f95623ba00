package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tasksExtension = "io.modelcontextprotocol/tasks"

// startTaskExtServer starts node/taskextserver.mjs, a 2026-07-28 upstream on the
// TypeScript SDK v2 that serves the tasks extension, and returns its URL and log.
func startTaskExtServer(t *testing.T) (url string, log *logBuffer) {
	t.Helper()
	return startModernNodeServer(t, "taskextserver")
}

// taskExtConfig fronts taskextserver at url as the server ext, its tools
// prefixed x_, its instance shared by every session when stateless.
func taskExtConfig(url string, stateless bool) string {
	return fmt.Sprintf(`version: 1
servers:
  ext:
    url: %s
    protocol: "2026-07-28"
    truely-stateless: %t
    transform: [{prefix: x_}]
`, url, stateless)
}

// startExtAggregator serves config over streamable HTTP to the clients named
// (alice, bob, ...), each known by a bearer token of its own, and returns it
// loaded, with a caller for each name in order.
func startExtAggregator(t *testing.T, config string, names ...string) (*aggregator, []*extCaller) {
	t.Helper()
	require.True(t, strings.HasPrefix(config, "version: 1\n"), "%s", config)
	var entries, env []string
	tokens := make([]string, len(names))
	for i, name := range names {
		tokens[i] = randomToken(t)
		entries = append(entries, fmt.Sprintf("%s: {env: %s_TOKEN}", name, strings.ToUpper(name)))
		env = append(env, strings.ToUpper(name)+"_TOKEN="+tokens[i])
	}
	auth := "version: 1\nhttp: {auth: {tokens: {" + strings.Join(entries, ", ") + "}}}\n"
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, strings.Replace(config, "version: 1\n", auth, 1))},
		env:     env,
	})
	a.waitLoaded()
	callers := make([]*extCaller, len(names))
	for i, token := range tokens {
		callers[i] = &extCaller{t: t, url: a.url, token: token}
	}
	return a, callers
}

// extCaller sends 2026-07-28 requests to the aggregator as one http.auth client.
type extCaller struct {
	t     *testing.T
	url   string
	token string
	id    int
}

// do sends method with params, declaring the tasks extension when ext, in the
// conversation lease ("" names none), with Mcp-Name set to name.
func (c *extCaller) do(method, name string, params map[string]any, ext bool, lease string) message {
	c.t.Helper()
	c.id++
	p := map[string]any{"_meta": requestMeta(ext, lease)}
	for k, v := range params {
		p[k] = v
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": p})
	require.NoError(c.t, err)
	r := modernRaw(c.t, c.url, method, name, string(body), http.Header{"Authorization": {"Bearer " + c.token}})
	return coreMessage(c.t, r)
}

// requestMeta is the _meta of a 2026-07-28 request of the test client,
// declaring the tasks extension when ext, in the conversation lease ("" names
// none).
func requestMeta(ext bool, lease string) map[string]any {
	caps := map[string]any{}
	if ext {
		caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": modernVersion, "io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "tasksext-test", "version": "1"}}
	if lease != "" {
		meta["mcp-aggregator/lease"] = lease
	}
	return meta
}

// call calls tool with args, declaring the tasks extension, in the
// conversation lease.
func (c *extCaller) call(tool string, args map[string]any, lease string) message {
	c.t.Helper()
	return c.do("tools/call", tool, map[string]any{"name": tool, "arguments": args}, true, lease)
}

// onTask sends method (tasks/get, tasks/cancel) naming the task id, declaring
// the tasks extension, in the conversation lease.
func (c *extCaller) onTask(method, id, lease string) message {
	c.t.Helper()
	return c.do(method, id, map[string]any{"taskId": id}, true, lease)
}

// extensions are the extensions server/discover offers a client that declares
// the tasks extension, and the raw result they came in.
func (c *extCaller) extensions() (map[string]json.RawMessage, json.RawMessage) {
	c.t.Helper()
	discover := c.do("server/discover", "", nil, true, "")
	var disc struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	require.NoError(c.t, json.Unmarshal(discover.Result, &disc), "%s", discover.Result)
	return disc.Capabilities.Extensions, discover.Result
}

// task is the aggregator's answer as a task (a CreateTaskResult or tasks/get's
// Task), less what changes from run to run.
func taskShape(t *testing.T, m message) (id string, shape map[string]any) {
	t.Helper()
	require.Empty(t, m.Error, "%s", m.Error)
	require.NoError(t, json.Unmarshal(m.Result, &shape), "%s", m.Result)
	id, _ = shape["taskId"].(string)
	for _, k := range []string{"taskId", "createdAt", "lastUpdatedAt", "_meta"} {
		delete(shape, k)
	}
	return id, shape
}

func errorCode(t *testing.T, m message) int {
	t.Helper()
	require.NotEmpty(t, m.Error, "an error, not %s", m.Result)
	return coreErrorCode(m.Error)
}

// assertAcknowledged asserts that m is the extension's empty acknowledgement.
func assertAcknowledged(t *testing.T, m message, msgAndArgs ...any) {
	t.Helper()
	require.Empty(t, m.Error, "%s", m.Error)
	var ack map[string]any
	require.NoError(t, json.Unmarshal(m.Result, &ack), "%s", m.Result)
	delete(ack, "_meta")
	assert.Equal(t, map[string]any{"resultType": "complete"}, ack, msgAndArgs...)
}

// TestTasksExtensionRelayed: a 2026-07-28 upstream on the TypeScript SDK v2 serving
// the tasks extension (node/taskextserver.mjs) behind the aggregator. A sessionless
// client that declares the extension is offered it (server/discover), the upstream
// is told so on its request and answers with a task; the client sees the
// aggregator's task id, never the upstream's, and drives the task through
// tasks/get, tasks/update (inputResponses) and tasks/cancel, which reach the
// upstream under its own id. Another client, or another conversation of the same
// client, does not find the task; a request that declares no extension gets the
// tool's plain result.
func TestTasksExtensionRelayed(t *testing.T) {
	t.Parallel()
	url, serverLog := startTaskExtServer(t)
	a, callers := startExtAggregator(t, taskExtConfig(url, true), "alice", "bob")
	ac, bc := callers[0], callers[1]
	fail := func(m message) string {
		return fmt.Sprintf("%s\nserver log:\n%s\naggregator log:\n%s", m.Error, serverLog, a.log)
	}

	extensions, discovered := ac.extensions()
	assert.JSONEq(t, `{}`, string(extensions[tasksExtension]), "the extension is offered: %s", discovered)

	// Without the extension the upstream is not told of it, and answers at once.
	plain := ac.do("tools/call", "x_greet", map[string]any{"name": "x_greet", "arguments": map[string]any{"text": "hi"}}, false, "conv-1")
	require.Empty(t, plain.Error, fail(plain))
	assert.Equal(t, "hi, whoever you are", resultText(t, plain.Result))

	created := ac.call("x_greet", map[string]any{"text": "hi"}, "conv-1")
	require.Empty(t, created.Error, fail(created))
	id, shape := taskShape(t, created)
	assert.Equal(t, map[string]any{"resultType": "task", "status": "input_required", "ttlMs": float64(60000), "pollIntervalMs": float64(50), "content": []any{}}, shape)
	require.True(t, strings.HasPrefix(id, "task-"), "the aggregator's id, not the upstream's: %q", id)

	// Another principal, and another conversation of alice, do not find it.
	assert.Equal(t, -32602, errorCode(t, bc.onTask("tasks/get", id, "conv-1")), "bob does not find alice's task")
	assert.Equal(t, -32602, errorCode(t, bc.onTask("tasks/cancel", id, "")))
	assert.Equal(t, -32602, errorCode(t, ac.onTask("tasks/get", id, "conv-2")), "another conversation does not find it")

	polled := ac.onTask("tasks/get", id, "conv-1")
	gotID, shape := taskShape(t, polled)
	assert.Equal(t, id, gotID)
	assert.Equal(t, map[string]any{"resultType": "complete", "status": "input_required", "ttlMs": float64(60000), "pollIntervalMs": float64(50),
		"inputRequests": map[string]any{"name": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "Whom to greet?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []any{"name"}}}}}}, shape)

	updated := ac.do("tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{"name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}, true, "conv-1")
	require.Empty(t, updated.Error, fail(updated))
	assertAcknowledged(t, updated)

	// A request that names no conversation finds any task of its principal.
	done := ac.onTask("tasks/get", id, "")
	gotID, shape = taskShape(t, done)
	assert.Equal(t, id, gotID)
	assert.Equal(t, map[string]any{"resultType": "complete", "status": "completed", "ttlMs": float64(60000), "pollIntervalMs": float64(50),
		"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "hi, Ada"}}}}, shape)

	lingering := ac.call("x_linger", map[string]any{}, "conv-1")
	lingerID, shape := taskShape(t, lingering)
	assert.Equal(t, "working", shape["status"])
	cancelled := ac.onTask("tasks/cancel", lingerID, "conv-1")
	require.Empty(t, cancelled.Error, fail(cancelled))
	_, shape = taskShape(t, ac.onTask("tasks/get", lingerID, "conv-1"))
	assert.Equal(t, "cancelled", shape["status"])

	// The upstream heard of its own ids only, each request naming one. Its log
	// comes through a pipe, and may lag behind its answers: wait for its lines.
	serverLog.waitLines(5, func(line string) bool { return strings.HasPrefix(line, "taskextserver: tasks/") }, startTimeout)
	log := serverLog.String()
	assert.NotContains(t, log, id)
	assert.NotContains(t, log, lingerID)
	var methods []string
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, "taskextserver: tasks/"); ok {
			method, upID, _ := strings.Cut(rest, " ")
			methods = append(methods, method)
			assert.Len(t, upID, 36, "an upstream UUID: %q", line)
		}
	}
	assert.Equal(t, []string{"get", "update", "get", "cancel", "get"}, methods)
}

// TestTasksExtensionEndsWithItsConversation: a task of the tasks extension on an
// instance leased to a sessionless conversation belongs to that conversation's
// Session, which ends with its last lease: once mcp_release ends the lease, the task
// is not found (rather than lost with its instance), while a task of another
// conversation of the same client goes on.
func TestTasksExtensionEndsWithItsConversation(t *testing.T) {
	t.Parallel()
	url, serverLog := startTaskExtServer(t)
	a, callers := startExtAggregator(t, taskExtConfig(url, false), "alice")
	ac := callers[0]
	start := func(lease string) string {
		t.Helper()
		m := ac.call("x_linger", map[string]any{}, lease)
		require.Empty(t, m.Error, "%s\nserver log:\n%s\naggregator log:\n%s", m.Error, serverLog, a.log)
		id, shape := taskShape(t, m)
		require.Equal(t, "working", shape["status"])
		return id
	}
	mine, other := start("conv-1"), start("conv-2")
	_, shape := taskShape(t, ac.onTask("tasks/get", mine, "conv-1"))
	assert.Equal(t, "working", shape["status"])

	released := ac.call("mcp_release", map[string]any{"serverId": "ext"}, "conv-1")
	require.Empty(t, released.Error, "%s", released.Error)
	assert.Contains(t, resultText(t, released.Result), "released")

	gone := ac.onTask("tasks/get", mine, "conv-1")
	assert.Equal(t, -32602, errorCode(t, gone))
	var e struct {
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(gone.Error, &e))
	assert.Contains(t, e.Message, "not found", "the conversation's Session ended with its lease, and its tasks with it")

	_, shape = taskShape(t, ac.onTask("tasks/get", other, "conv-2"))
	assert.Equal(t, "working", shape["status"], "another conversation's task goes on")
}

// TestTasksExtensionBridgedToOlderUpstream: a sessionless client that declares the
// tasks extension, in front of 2025-11-25 servers whose tools run as tasks (the
// TypeScript SDK 1.x, node/taskserver.mjs), is offered the extension and gets its
// tasks: the call goes up task-augmented and comes back as a task handle under the
// aggregator's id; tasks/get follows the task to its end and then carries its result
// (tasks/result upstream); tasks/cancel acknowledges, and the task is then cancelled;
// tasks/update is refused, naming why.
func TestTasksExtensionBridgedToOlderUpstream(t *testing.T) {
	t.Parallel()
	a, callers := startExtAggregator(t, tasksConfig(t), "alice")
	ac := callers[0]

	extensions, discovered := ac.extensions()
	assert.Contains(t, extensions, tasksExtension, "the servers' 2025-11-25 tasks are offered as the extension: %s", discovered)

	call := func(tool string, args map[string]any) string {
		t.Helper()
		m := ac.call(tool, args, "conv-1")
		require.Empty(t, m.Error, "%s\naggregator log:\n%s", m.Error, a.log)
		id, shape := taskShape(t, m)
		assert.Equal(t, "task", shape["resultType"], "%s", m.Result)
		assert.Equal(t, float64(60000), shape["ttlMs"], "ttl becomes ttlMs: %s", m.Result)
		assert.NotContains(t, shape, "ttl")
		require.True(t, strings.HasPrefix(id, "task-") && len(id) > len("task-1"), "the aggregator's id: %q", id)
		return id
	}
	id := call("a_countdown", map[string]any{"label": "bridged", "steps": 2, "stepMs": 20})
	shape := pollTask(t, ac, id, "conv-1", func(shape map[string]any) bool { return shape["status"] != "working" })
	require.Equal(t, "completed", shape["status"], "%v", shape)
	result, _ := json.Marshal(shape["result"])
	assert.Equal(t, "bridged done after 2 steps", resultText(t, result))

	long := call("a_countdown", map[string]any{"label": "long", "steps": 1000, "stepMs": 100})
	update := ac.do("tasks/update", long, map[string]any{"taskId": long, "inputResponses": map[string]any{"never-asked": map[string]any{}}}, true, "conv-1")
	require.Empty(t, update.Error, "a response to nothing asked is ignored: %s", update.Error)
	assertAcknowledged(t, ac.onTask("tasks/cancel", long, "conv-1"), "an empty acknowledgement")
	_, shape = taskShape(t, ac.onTask("tasks/get", long, "conv-1"))
	assert.Equal(t, "cancelled", shape["status"])
}

// pollTask polls tasks/get for id until until says the task is as it should be
// (or callTimeout passed), and returns its last shape.
func pollTask(t *testing.T, ac *extCaller, id, lease string, until func(shape map[string]any) bool) map[string]any {
	t.Helper()
	var shape map[string]any
	for deadline := time.Now().Add(callTimeout); ; {
		_, shape = taskShape(t, ac.onTask("tasks/get", id, lease))
		if until(shape) || time.Now().After(deadline) {
			return shape
		}
		interval, _ := shape["pollIntervalMs"].(float64)
		time.Sleep(time.Duration(max(interval, 10)) * time.Millisecond) // as the task asks
	}
}

// TestTasksExtensionBridgedInput: a 2025-11-25 task that needs input, behind a
// client of the tasks extension. Its request (elicitation/create naming the task)
// shows among the inputRequests of tasks/get, with the status input_required and
// the task named by the client's id; the client's tasks/update answers it, and the
// task ends with the answer. Whether the upstream asks of its own accord
// (taskserver's reporter, on a shared instance) or only while a requestor waits in
// tasks/result (server-everything's research task, input_required).
func TestTasksExtensionBridgedInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, config, tool string
		args               map[string]any
		answer             map[string]any
		check              func(t *testing.T, result json.RawMessage)
	}{{
		name:   "asked of its own accord",
		config: tasksConfig(t),
		tool:   "a_reporter",
		args:   map[string]any{"label": "ask", "steps": 1, "stepMs": 10, "ask": true},
		answer: map[string]any{"action": "accept", "content": map[string]any{"keep": true}},
		check:  assertReporterAnswered,
	}, {
		name:   "asked during tasks/result",
		config: researchConfig(t),
		tool:   "ev_simulate-research-query",
		args:   map[string]any{"topic": "tea", "ambiguous": true},
		answer: map[string]any{"action": "accept", "content": map[string]any{"interpretation": "historical"}},
		check: func(t *testing.T, result json.RawMessage) {
			assert.Contains(t, resultText(t, result), "Clarification**: historical", "the client's answer reached the task")
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, callers := startExtAggregator(t, tc.config, "alice")
			ac := callers[0]
			m := ac.call(tc.tool, tc.args, "conv-1")
			require.Empty(t, m.Error, "%s\naggregator log:\n%s", m.Error, a.log)
			id, shape := taskShape(t, m)
			require.Equal(t, "task", shape["resultType"], "%s", m.Result)

			shape = pollTask(t, ac, id, "conv-1", func(shape map[string]any) bool { return shape["inputRequests"] != nil || shape["status"] != "working" })
			require.Equal(t, "input_required", shape["status"], "%v\naggregator log:\n%s", shape, a.log)
			requests, _ := shape["inputRequests"].(map[string]any)
			require.Len(t, requests, 1, "%v", shape)
			var key string
			var request map[string]any
			for k, v := range requests {
				key, request = k, v.(map[string]any)
			}
			assert.Equal(t, "elicitation/create", request["method"], "%v", request)
			related, _ := request["params"].(map[string]any)["_meta"].(map[string]any)["io.modelcontextprotocol/related-task"].(map[string]any)
			assert.Equal(t, id, related["taskId"], "the request names the task by the client's id: %v", request)

			again := ac.onTask("tasks/get", id, "other-conv")
			assert.Equal(t, -32602, errorCode(t, again), "another conversation does not find the task")

			answer := map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": id}}}
			for k, v := range tc.answer {
				answer[k] = v
			}
			update := ac.do("tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{key: answer, "never-asked": map[string]any{}}}, true, "conv-1")
			require.Empty(t, update.Error, "%s", update.Error)

			shape = pollTask(t, ac, id, "conv-1", func(shape map[string]any) bool {
				return shape["status"] == "completed" || shape["status"] == "failed" || shape["status"] == "cancelled"
			})
			require.Equal(t, "completed", shape["status"], "%v\naggregator log:\n%s", shape, a.log)
			assert.NotContains(t, shape, "inputRequests", "answered: %v", shape)
			result, _ := json.Marshal(shape["result"])
			tc.check(t, result)

			bad := ac.do("tasks/update", id, map[string]any{"taskId": id, "inputResponses": []any{}}, true, "conv-1")
			assert.Equal(t, -32602, errorCode(t, bad), "inputResponses must be an object")
		})
	}
}

// listenTasks opens a subscriptions/listen stream of c naming taskIds in
// conversation lease, and returns the taskIds its acknowledgement grants and
// the stream's later events (each a JSON-RPC message).
func (c *extCaller) listenTasks(ctx context.Context, lease string, taskIDs []string) (granted []string, events chan message) {
	c.t.Helper()
	c.id++
	body := mustJSON(c.t, map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "subscriptions/listen",
		"params": map[string]any{"_meta": requestMeta(true, lease), "notifications": map[string]any{"taskIds": taskIDs}}})
	req := modernHTTPRequest(c.t, ctx, c.url, "subscriptions/listen", "", string(body), http.Header{"Authorization": {"Bearer " + c.token}})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	events = make(chan message, 64)
	go func() {
		defer close(events)
		_ = readSSE(resp.Body, func(d []byte) bool {
			var m message
			if json.Unmarshal(d, &m) == nil {
				events <- m
			}
			return true
		})
	}()
	select {
	case ack, ok := <-events:
		require.True(c.t, ok, "the listen stream closed before its acknowledgement")
		require.Equal(c.t, "notifications/subscriptions/acknowledged", ack.Method)
		var p struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		}
		require.NoError(c.t, json.Unmarshal(ack.Params, &p), "%s", ack.Params)
		return p.Notifications.TaskIDs, events
	case <-time.After(callTimeout):
		c.t.Fatal("subscriptions/listen was never acknowledged")
	}
	return nil, nil
}

// TestTasksExtensionNotifications: a client's subscriptions/listen naming its own
// bridged task (taskserver's countdown, which announces each step with
// notifications/tasks/status) is granted it, and hears of the task's steps as
// notifications/tasks under the aggregator's id, to the end; a task id of another
// conversation or of another client, or one that never was, is not granted.
func TestTasksExtensionNotifications(t *testing.T) {
	t.Parallel()
	a, callers := startExtAggregator(t, tasksConfig(t), "alice", "bob")
	ac, bc := callers[0], callers[1]
	m := ac.call("a_countdown", map[string]any{"label": "heard", "steps": 20, "stepMs": 100}, "conv-1")
	id, _ := taskShape(t, m)
	require.NotEmpty(t, id, "%s\naggregator log:\n%s", m.Result, a.log)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	granted, events := ac.listenTasks(ctx, "conv-1", []string{id, "task-1", "task-00000000000000000000000000000000"})
	assert.Equal(t, []string{id}, granted, "only the client's own task is granted")
	other, _ := ac.listenTasks(ctx, "conv-2", []string{id})
	assert.Empty(t, other, "another conversation's task is not granted")
	stranger, _ := bc.listenTasks(ctx, "conv-1", []string{id})
	assert.Empty(t, stranger, "another client's task is not granted")

	var steps int
	for deadline := time.After(callTimeout); ; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the listen stream ended before the task did")
			if ev.Method != "notifications/tasks" {
				continue
			}
			var task map[string]any
			require.NoError(t, json.Unmarshal(ev.Params, &task))
			assert.Equal(t, id, task["taskId"], "the aggregator's id: %s", ev.Params)
			assert.NotContains(t, task, "ttl", "the extension's Task: %s", ev.Params)
			assert.Contains(t, task, "ttlMs", "the extension's Task: %s", ev.Params)
			steps++
			if task["status"] == "completed" {
				assert.Greater(t, steps, 1, "the steps were heard before the end")
				return
			}
		case <-deadline:
			t.Fatalf("no notifications/tasks of a completed task within %s (%d heard)\naggregator log:\n%s", callTimeout, steps, a.log)
		}
	}
}

// TestTasksExtensionNotificationsFromUpstream: a 2026-07-28 upstream's
// notifications/tasks (taskextserver sends one, with the completed Task, on the
// stream of the tasks/update that completes its greeting) reaches the listen
// stream granted the task, under the aggregator's id; the upstream's id never.
func TestTasksExtensionNotificationsFromUpstream(t *testing.T) {
	t.Parallel()
	url, serverLog := startTaskExtServer(t)
	a, callers := startExtAggregator(t, taskExtConfig(url, true), "alice")
	ac := callers[0]
	m := ac.call("x_greet", map[string]any{"text": "hello"}, "conv-1")
	id, _ := taskShape(t, m)
	require.NotEmpty(t, id, "%s", m.Result)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	granted, events := ac.listenTasks(ctx, "conv-1", []string{id})
	require.Equal(t, []string{id}, granted)
	update := ac.do("tasks/update", id, map[string]any{"taskId": id,
		"inputResponses": map[string]any{"name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}, true, "conv-1")
	require.Empty(t, update.Error, "%s\nserver log:\n%s", update.Error, serverLog)
	select {
	case ev, ok := <-events:
		require.True(t, ok, "the listen stream ended")
		require.Equal(t, "notifications/tasks", ev.Method, "%s", ev.Params)
		var task map[string]any
		require.NoError(t, json.Unmarshal(ev.Params, &task))
		assert.Equal(t, id, task["taskId"], "the aggregator's id: %s", ev.Params)
		assert.Equal(t, "completed", task["status"])
		result, _ := json.Marshal(task["result"])
		assert.Equal(t, "hello, Ada", resultText(t, result))
	case <-time.After(callTimeout):
		t.Fatalf("no notifications/tasks within %s\nserver log:\n%s\naggregator log:\n%s", callTimeout, serverLog, a.log)
	}
}

// TestTasksExtensionForOlderSession: a 2025-11-25 session in front of a 2026-07-28
// upstream that speaks the tasks extension (taskextserver). Its task-augmented
// tools/call gets a CreateTaskResult under the aggregator's id (ttlMs as ttl);
// tasks/get answers the upstream's Task as 2025-11-25's; tasks/result waits for
// the task, asking the session what the task's inputRequests ask (an
// elicitation naming the task by the session's id), and answers with the
// result; tasks/cancel cancels a task upstream. initialize offers the tasks
// capability and tools/list gives the upstream's tools execution.taskSupport
// "optional", as the bridge runs any of them as a task. The upstream's
// notifications/tasks of the task reach the session as
// notifications/tasks/status, 2025-11-25's Task under the aggregator's id.
func TestTasksExtensionForOlderSession(t *testing.T) {
	t.Parallel()
	url, serverLog := startTaskExtServer(t)
	a := serveConfig(t, stdioTransport, taskExtConfig(url, true))
	a.waitLoaded()
	c, asked := elicitingClient(a, func(json.RawMessage) string { return `{"action":"accept","content":{"name":"Ada"}}` })
	init := c.initializeWith(map[string]any{"elicitation": map[string]any{}})
	var initRes struct {
		Capabilities struct {
			Tasks struct {
				Requests struct {
					Tools struct {
						Call json.RawMessage `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(init, &initRes), "%s", init)
	assert.JSONEq(t, `{}`, string(initRes.Capabilities.Tasks.Requests.Tools.Call), "initialize offers task-augmented tools/call: %s", init)
	var toolList struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	lr := c.mustRequest("tools/list", map[string]any{})
	require.Empty(t, string(lr.Error), "tools/list")
	require.NoError(t, json.Unmarshal(lr.Result, &toolList), "%s", lr.Result)
	require.NotEmpty(t, toolList.Tools)
	for _, tool := range toolList.Tools {
		if !strings.HasPrefix(string(tool["name"]), `"x_`) {
			continue // the aggregator's own
		}
		assert.JSONEq(t, `{"taskSupport":"optional"}`, string(tool["execution"]), "%s runs as a task for a 2025-11-25 session", tool["name"])
	}

	resp := c.mustRequest("tools/call", map[string]any{"name": "x_greet", "arguments": map[string]any{"text": "hello"}, "task": map[string]any{"ttl": 60000}})
	require.Empty(t, string(resp.Error), "%s\nserver log:\n%s\naggregator log:\n%s", resp.Error, serverLog, a.log)
	var created struct {
		Task map[string]any `json:"task"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &created), "%s", resp.Result)
	id, _ := created.Task["taskId"].(string)
	require.True(t, strings.HasPrefix(id, "task-") && len(id) > len("task-1"), "the aggregator's id: %s", resp.Result)
	assert.Equal(t, float64(60000), created.Task["ttl"], "ttlMs becomes ttl: %s", resp.Result)
	assert.NotContains(t, created.Task, "ttlMs")
	assert.NotContains(t, created.Task, "resultType")

	got := mustResult(t, c.mustRequest("tasks/get", map[string]any{"taskId": id}), "tasks/get")
	assert.Equal(t, id, got["taskId"])
	assert.Equal(t, "input_required", got["status"])
	assert.NotContains(t, got, "inputRequests", "2025-11-25's Task carries no requests")

	res := c.mustRequest("tasks/result", map[string]any{"taskId": id})
	require.Empty(t, string(res.Error), "tasks/result: %s\naggregator log:\n%s", res.Error, a.log)
	assert.Equal(t, "hello, Ada", resultText(t, res.Result), "the session's answer reached the task")
	select {
	case params := <-asked:
		assert.Equal(t, id, relatedTaskID(t, params), "the elicitation names the task by the session's id")
	default:
		t.Fatal("the session was never asked")
	}
	note, ok := c.waitNotification(func(n notification) bool {
		return n.Method == "notifications/tasks/status" && strings.Contains(string(n.Params), id)
	}, callTimeout)
	require.True(t, ok, "the upstream's notifications/tasks reaches the session as notifications/tasks/status")
	var status map[string]any
	require.NoError(t, json.Unmarshal(note.Params, &status), "%s", note.Params)
	assert.Equal(t, id, status["taskId"])
	assert.Equal(t, "completed", status["status"])
	assert.NotContains(t, status, "result", "2025-11-25's Task: %s", note.Params)
	assert.NotContains(t, status, "resultType")
	assert.Equal(t, float64(60000), status["ttl"], "%s", note.Params)

	got = mustResult(t, c.mustRequest("tasks/get", map[string]any{"taskId": id}), "tasks/get")
	assert.Equal(t, "completed", got["status"])
	listed := mustResult(t, c.mustRequest("tasks/list", map[string]any{}), "tasks/list")
	require.Len(t, listed["tasks"], 1, "%v", listed)
	item := listed["tasks"].([]any)[0].(map[string]any)
	assert.Equal(t, id, item["taskId"])
	assert.Equal(t, "completed", item["status"])
	assert.NotContains(t, item, "result", "2025-11-25's Task: %v", item)

	resp = c.mustRequest("tools/call", map[string]any{"name": "x_linger", "arguments": map[string]any{}, "task": map[string]any{}})
	require.Empty(t, string(resp.Error), "%s", resp.Error)
	require.NoError(t, json.Unmarshal(resp.Result, &created), "%s", resp.Result)
	linger, _ := created.Task["taskId"].(string)
	cancelled := mustResult(t, c.mustRequest("tasks/cancel", map[string]any{"taskId": linger}), "tasks/cancel")
	assert.Equal(t, linger, cancelled["taskId"])
	assert.Equal(t, "cancelled", cancelled["status"], "cancelled upstream: %v", cancelled)
	// The upstream's log comes through a pipe, and may lag behind its answer.
	_, went := serverLog.waitLine(func(line string) bool { return strings.HasPrefix(line, "taskextserver: tasks/cancel ") }, startTimeout, nil)
	assert.True(t, went, "the cancel went upstream; server log:\n%s", serverLog)
}
