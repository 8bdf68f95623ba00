package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tasksConfig fronts two task servers (node/taskserver.mjs), each shared by
// every session. Both number their tasks from "task-1", so their ids collide.
func tasksConfig(t *testing.T) string {
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json") // the SDK is installed
	return "version: 1\nservers:\n" + taskServerEntry("alpha", "a_", statelessServer) + taskServerEntry("beta", "b_", statelessServer)
}

// taskServerEntry is the config of the server name running taskserver.mjs on
// stdio, its tools prefixed with prefix, and the settings given.
func taskServerEntry(name, prefix string, settings ...string) string {
	return serverEntry(name, prefix, append(settings, "command: node", "args: ["+quoted(filepath.Join(nodeDir, "taskserver.mjs"))+"]")...)
}

// elicitedClient opens a session whose client declares elicitation and
// answers each elicitation/create with what answer makes of its params, and
// no other request; the params come on the channel returned, which holds
// four (a fifth waits until one is read).
func elicitedClient(a *aggregator, answer func(params json.RawMessage) string) (*client, <-chan json.RawMessage) {
	c, asked := elicitingClient(a, answer)
	c.initializeWith(map[string]any{"elicitation": map[string]any{}})
	return c, asked
}

// elicitingClient is elicitedClient's client before its initialize, which
// is the caller's to send.
func elicitingClient(a *aggregator, answer func(params json.RawMessage) string) (*client, <-chan json.RawMessage) {
	c := a.newClient()
	asked := make(chan json.RawMessage, 4)
	c.inbox.onRequest = func(method string, params json.RawMessage) (string, string) {
		if method != "elicitation/create" {
			return "", `{"code":-32601,"message":"not here: ` + method + `"}`
		}
		asked <- params
		return answer(params), ""
	}
	return c, asked
}

// relatedTaskID is the task id of the related-task entry in the _meta of
// msg (a result, or a request's params).
func relatedTaskID(t *testing.T, msg json.RawMessage) string {
	t.Helper()
	var m struct {
		Meta map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(msg, &m), "%s", msg)
	return m.Meta["io.modelcontextprotocol/related-task"].TaskID
}

// sentByUpstream is what taskserver.mjs reports it sent about a task or call,
// each message as it wrote it: the structuredContent.sent of its result.
func sentByUpstream(t *testing.T, result json.RawMessage) []json.RawMessage {
	t.Helper()
	var r struct {
		Structured struct {
			Sent []json.RawMessage `json:"sent"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(result, &r), "%s", result)
	return r.Structured.Sent
}

// taskObject is a Task as a result or notification carries it.
type taskObject struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage"`
	TTL           *float64 `json:"ttl"`
	PollInterval  float64  `json:"pollInterval"`
	CreatedAt     string   `json:"createdAt"`
}

// startTask calls tool as a task and returns the task it created.
func startTask(t *testing.T, c *client, tool string, args map[string]any) taskObject {
	t.Helper()
	resp := c.mustRequest("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}})
	require.Empty(t, string(resp.Error), "tools/call %s as a task", tool)
	var created struct {
		Task    *taskObject     `json:"task"`
		Content json.RawMessage `json:"content"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &created))
	require.NotNil(t, created.Task, "a CreateTaskResult: %s", resp.Result)
	assert.Nil(t, created.Content, "nothing is added to a CreateTaskResult: %s", resp.Result)
	return *created.Task
}

// taskError is a JSON-RPC error of a tasks request.
type taskError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func mustTaskError(t *testing.T, resp *response, what string) taskError {
	t.Helper()
	require.NotEmpty(t, string(resp.Error), "%s must fail; result %s", what, resp.Result)
	var e taskError
	require.NoError(t, json.Unmarshal(resp.Error, &e))
	return e
}

// listTasks pages through tasks/list and returns every task's id, in order.
func listTasks(t *testing.T, c *client) []string {
	t.Helper()
	var ids []string
	params := map[string]any{}
	for range 100 {
		page := mustResult(t, c.mustRequest("tasks/list", params), "tasks/list")
		for _, item := range page["tasks"].([]any) {
			ids = append(ids, item.(map[string]any)["taskId"].(string))
		}
		next, _ := page["nextCursor"].(string)
		if next == "" {
			return ids
		}
		params = map[string]any{"cursor": next}
	}
	t.Fatal("tasks/list never ended: more than 100 pages")
	return nil
}

// statusNotes returns the taskIds of the notifications/tasks/status c received.
func statusNotes(t *testing.T, c *client) map[string][]taskObject {
	t.Helper()
	out := map[string][]taskObject{}
	for _, n := range c.inboxNotes() {
		if n.Method != "notifications/tasks/status" {
			continue
		}
		var task taskObject
		require.NoError(t, json.Unmarshal(n.Params, &task))
		out[task.TaskID] = append(out[task.TaskID], task)
	}
	return out
}

// TestTasksRouted: two sessions and two upstreams whose task ids collide.
// Each task gets an id of the aggregator's own; tasks/get, tasks/result and
// tasks/cancel reach the upstream that runs the task; a session lists, hears
// of and reaches only its own tasks, and another session's id is not found,
// exactly as a forged one.
func TestTasksRouted(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, tasksConfig(t))
	a.waitLoaded()
	alice, bob := a.newClient(), a.newClient()
	for _, c := range []*client{alice, bob} {
		init := c.initializeWith(map[string]any{})
		var res struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(init, &res))
		assert.JSONEq(t, `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`, string(res.Capabilities["tasks"]),
			"the upstreams' tasks capability is advertised")
		listen(t, a, c)
	}

	// Per-tool task support passes through untouched.
	for _, raw := range alice.listTools() {
		var tool struct {
			Name      string          `json:"name"`
			Execution json.RawMessage `json:"execution"`
		}
		require.NoError(t, json.Unmarshal(raw, &tool))
		switch tool.Name {
		case "a_countdown", "b_countdown":
			assert.JSONEq(t, `{"taskSupport":"optional"}`, string(tool.Execution), tool.Name)
		case "a_fails", "b_fails":
			assert.JSONEq(t, `{"taskSupport":"required"}`, string(tool.Execution), tool.Name)
		}
	}

	// Both upstreams call their first task task-1; the client sees two ids.
	ta := startTask(t, alice, "a_countdown", map[string]any{"label": "alpha job", "steps": 3, "stepMs": 100})
	tb := startTask(t, alice, "b_countdown", map[string]any{"label": "beta job", "steps": 3, "stepMs": 100})
	assert.NotEqual(t, ta.TaskID, tb.TaskID)
	for _, task := range []taskObject{ta, tb} {
		assert.NotEqual(t, "task-1", task.TaskID, "the upstream's id is not the client's")
		assert.Equal(t, "working", task.Status)
		require.NotNil(t, task.TTL)
		assert.Equal(t, float64(60000), *task.TTL, "the rest of the task as the upstream sent it")
		assert.Equal(t, float64(100), task.PollInterval)
	}

	// tasks/result waits for each task and gets its own server's result.
	for _, c := range []struct {
		task  taskObject
		label string
	}{{ta, "alpha job"}, {tb, "beta job"}} {
		res := alice.mustRequest("tasks/result", map[string]any{"taskId": c.task.TaskID})
		require.Empty(t, string(res.Error), "tasks/result %s", c.label)
		assert.Equal(t, c.label+" done after 3 steps", firstText(t, res.Result))
		assert.Equal(t, c.task.TaskID, relatedTaskID(t, res.Result), "the related task is the client's id")

		got := mustResult(t, alice.mustRequest("tasks/get", map[string]any{"taskId": c.task.TaskID}), "tasks/get")
		assert.Equal(t, c.task.TaskID, got["taskId"])
		assert.Equal(t, "completed", got["status"])
		assert.Equal(t, "step 3 of 3", got["statusMessage"])
	}

	// Status notifications reached alice, with her ids, and only her.
	_, ok := alice.waitNotification(func(n notification) bool {
		return n.Method == "notifications/tasks/status" && strings.Contains(string(n.Params), tb.TaskID) && strings.Contains(string(n.Params), `"completed"`)
	}, callTimeout)
	require.True(t, ok, "alice hears that her beta task completed")
	notes := statusNotes(t, alice)
	assert.Subset(t, []string{ta.TaskID, tb.TaskID}, keys(notes), "every status notification names one of alice's tasks by its client id")
	assert.NotEmpty(t, notes[ta.TaskID])
	assert.Empty(t, statusNotes(t, bob), "bob hears nothing of alice's tasks")

	// Bob cannot reach alice's tasks: not found, as a forged id is.
	forged := "task-00112233445566778899aabbccddeeff"
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		theirs := mustTaskError(t, bob.mustRequest(method, map[string]any{"taskId": ta.TaskID}), method+" of alice's task")
		none := mustTaskError(t, bob.mustRequest(method, map[string]any{"taskId": forged}), method+" of a forged id")
		assert.Equal(t, -32602, theirs.Code, method)
		assert.Equal(t, none.Code, theirs.Code, method)
		assert.Equal(t, strings.ReplaceAll(none.Message, forged, "ID"), strings.ReplaceAll(theirs.Message, ta.TaskID, "ID"),
			"%s: another session's task and no task look alike", method)
		assert.Contains(t, theirs.Message, "not found")
		// The upstream's own id is no way in either.
		assert.Equal(t, -32602, mustTaskError(t, bob.mustRequest(method, map[string]any{"taskId": "task-1"}), method+" of an upstream id").Code)
	}
	assert.Empty(t, listTasks(t, bob), "bob lists none of alice's tasks")

	// Bob's own task on alpha is alpha's task-3; he sees it, alice does not.
	mine := startTask(t, bob, "a_countdown", map[string]any{"label": "bob's job", "steps": 100, "stepMs": 100})
	assert.Equal(t, []string{mine.TaskID}, listTasks(t, bob))
	assert.Equal(t, []string{ta.TaskID, tb.TaskID}, listTasks(t, alice))
	assert.Equal(t, -32602, mustTaskError(t, alice.mustRequest("tasks/get", map[string]any{"taskId": mine.TaskID}), "alice gets bob's task").Code)

	// tasks/cancel reaches the upstream: the task stops, cancelled.
	cancelled := mustResult(t, bob.mustRequest("tasks/cancel", map[string]any{"taskId": mine.TaskID}), "tasks/cancel")
	assert.Equal(t, mine.TaskID, cancelled["taskId"])
	assert.Equal(t, "cancelled", cancelled["status"])
	got := mustResult(t, bob.mustRequest("tasks/get", map[string]any{"taskId": mine.TaskID}), "tasks/get after cancel")
	assert.Equal(t, "cancelled", got["status"])
	again := mustTaskError(t, bob.mustRequest("tasks/cancel", map[string]any{"taskId": mine.TaskID}), "cancel a cancelled task")
	assert.Equal(t, -32602, again.Code, "the upstream's refusal passes through: %s", again.Message)

	// A task that fails: tasks/result is the tool's error result.
	failing := startTask(t, alice, "b_fails", map[string]any{"message": "it went wrong"})
	res := alice.mustRequest("tasks/result", map[string]any{"taskId": failing.TaskID})
	require.Empty(t, string(res.Error))
	assert.Contains(t, string(res.Result), `"isError":true`)
	assert.Equal(t, "it went wrong", firstText(t, res.Result))
	assert.Equal(t, "failed", mustResult(t, alice.mustRequest("tasks/get", map[string]any{"taskId": failing.TaskID}), "tasks/get failed")["status"])

	// Requests that name no task are refused with what to send.
	assert.Equal(t, -32602, mustTaskError(t, alice.mustRequest("tasks/get", map[string]any{}), "tasks/get without an id").Code)
	assert.Equal(t, -32602, mustTaskError(t, alice.mustRequest("tasks/list", map[string]any{"cursor": "made-up"}), "a forged cursor").Code)

	// A sessionless (2026-07-28) request has no session to own a task.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	httpResp, err := modernPost(ctx, a.url, "tools/call", "a_countdown",
		map[string]any{"name": "a_countdown", "arguments": map[string]any{"label": "x"}, "task": map[string]any{}})
	require.NoError(t, err)
	_, data := readReply(t, httpResp)
	var sessionless struct {
		Error *taskError `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &sessionless), "%s", data)
	require.NotNil(t, sessionless.Error, "%s", data)
	assert.Equal(t, -32600, sessionless.Error.Code)
	assert.Contains(t, sessionless.Error.Message, "initialize a session")
}

// TestTasksListPages: a session's tasks/list comes in pages, with an opaque
// cursor, every task once and in the order they were created.
func TestTasksListPages(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, tasksConfig(t))
	a.waitLoaded()
	c := a.newClient()
	c.initializeWith(map[string]any{})
	var want []string
	for i := range 60 {
		server := "a_countdown"
		if i%2 == 1 {
			server = "b_countdown"
		}
		want = append(want, startTask(t, c, server, map[string]any{"label": "quick", "steps": 0, "stepMs": 0}).TaskID)
	}
	first := mustResult(t, c.mustRequest("tasks/list", map[string]any{}), "first page")
	assert.Len(t, first["tasks"], 50, "a page holds 50 tasks")
	assert.NotEmpty(t, first["nextCursor"])
	assert.Equal(t, want, listTasks(t, c))
}

// researchConfig fronts server-everything on stdio, shared by every session,
// its tools prefixed ev_, with only its research task
// (simulate-research-query), which asks for clarification while a requestor
// waits in tasks/result.
func researchConfig(t *testing.T) string {
	return "version: 1\nservers:\n" + everythingYAML("every", nodeEntry(t, everythingEntry), statelessServer,
		"transform: [{prefix: ev_}]", "tools: {whitelist: [simulate-research-query]}")
}

// TestTasksElicitationDuringResult: server-everything's research task asks
// for clarification while the client waits in tasks/result; the request
// reaches the client naming the task by the client's id, and the answer
// reaches the task.
func TestTasksElicitationDuringResult(t *testing.T) {
	t.Parallel()
	config := researchConfig(t)
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, config)
		a.waitLoaded()
		c, asked := elicitedClient(a, func(json.RawMessage) string {
			return `{"action":"accept","content":{"interpretation":"historical"}}`
		})
		task := startTask(t, c, "ev_simulate-research-query", map[string]any{"topic": "tea", "ambiguous": true})

		res := c.mustRequest("tasks/result", map[string]any{"taskId": task.TaskID})
		require.Empty(t, string(res.Error), "tasks/result")
		assert.Contains(t, firstText(t, res.Result), "Clarification**: historical", "the client's answer reached the task")
		select {
		case params := <-asked:
			assert.Equal(t, task.TaskID, relatedTaskID(t, params), "the elicitation names the task by the client's id")
		default:
			t.Fatal("the client was never asked")
		}
		got := mustResult(t, c.mustRequest("tasks/get", map[string]any{"taskId": task.TaskID}), "tasks/get")
		assert.Equal(t, "completed", got["status"])
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTasksResultTimeout: tasks/result is bounded by the tool's timeout and says
// the task goes on; the task can still be polled and its result fetched.
func TestTasksResultTimeout(t *testing.T) {
	t.Parallel()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		taskServerEntry("alpha", "a_", statelessServer, "tools: {config: {countdown: {timeout: 1s}}}"))
	a.waitLoaded()
	c := a.newClient()
	c.initializeWith(map[string]any{})
	task := startTask(t, c, "a_countdown", map[string]any{"label": "slow", "steps": 15, "stepMs": 200})
	start := time.Now()
	e := mustTaskError(t, c.mustRequest("tasks/result", map[string]any{"taskId": task.TaskID}), "tasks/result past the tool's timeout")
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "bounded by the tool's 1s timeout")
	assert.Contains(t, e.Message, "the task goes on")
	assert.Contains(t, e.Message, "1s set by tools.config.countdown.timeout", "the error names the setting of the limit")
	got := mustResult(t, c.mustRequest("tasks/get", map[string]any{"taskId": task.TaskID}), "tasks/get")
	assert.Equal(t, "working", got["status"], "the task was not cancelled with tasks/result")
}

// TestTasksLeased: on a leased server each session's tasks run on its own
// instance, whose ids collide with the other's; a released lease takes its
// tasks with it.
func TestTasksLeased(t *testing.T) {
	t.Parallel()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	a := serveConfig(t, httpTransport, "version: 1\nservers:\n"+taskServerEntry("alpha", "a_", "lease: {prewarm: 0}"))
	a.waitLoaded()
	alice, bob := a.newClient(), a.newClient()
	alice.initializeWith(map[string]any{})
	bob.initializeWith(map[string]any{})
	ta := startTask(t, alice, "a_countdown", map[string]any{"label": "alice's", "steps": 2, "stepMs": 50})
	tb := startTask(t, bob, "a_countdown", map[string]any{"label": "bob's", "steps": 2, "stepMs": 50})
	assert.NotEqual(t, ta.TaskID, tb.TaskID, "each instance's task-1 is a task of its own")
	for _, c := range []struct {
		c     *client
		task  taskObject
		label string
	}{{alice, ta, "alice's"}, {bob, tb, "bob's"}} {
		res := c.c.mustRequest("tasks/result", map[string]any{"taskId": c.task.TaskID})
		require.Empty(t, string(res.Error))
		assert.Equal(t, c.label+" done after 2 steps", firstText(t, res.Result), "routed to the session's own instance")
		assert.Equal(t, []string{c.task.TaskID}, listTasks(t, c.c))
	}

	// The lease ends: the instance, and alice's task on it, are gone.
	alice.callToolResult("mcp_release", map[string]any{"serverId": "alpha"})
	lost := mustTaskError(t, alice.mustRequest("tasks/get", map[string]any{"taskId": ta.TaskID}), "a task of a released lease")
	assert.Equal(t, -32602, lost.Code)
	assert.Contains(t, lost.Message, "is lost")
	assert.Empty(t, listTasks(t, alice), "a lost task is forgotten")
	assert.Equal(t, "completed", mustResult(t, bob.mustRequest("tasks/get", map[string]any{"taskId": tb.TaskID}), "bob's task")["status"])
}

// TestTasksEndedSession: when a session ends, its tasks on a shared
// instance, which no one can reach any more, are cancelled upstream.
func TestTasksEndedSession(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, tasksConfig(t))
	a.waitLoaded()
	alice := a.newClient()
	alice.initializeWith(map[string]any{})
	task := startTask(t, alice, "a_countdown", map[string]any{"label": "forever", "steps": 1000, "stepMs": 100})
	w := alice.wire.(*httpWire)
	require.NoError(t, w.close())
	w.mu.Lock()
	w.session = "" // closed: nothing left for the test's cleanup to end
	w.mu.Unlock()
	line, ok := a.log.waitLine(func(line string) bool {
		return strings.Contains(line, `msg="task of an ended session cancelled"`) && strings.Contains(line, task.TaskID)
	}, callTimeout, a.exited)
	require.True(t, ok, "the ended session's task was cancelled; stderr:\n%s", a.log)
	assert.Contains(t, line, "err=<nil>", "the upstream accepted the cancellation")
	assert.NotContains(t, line, "task-1 ", "the log names the task by the aggregator's id")
}

// TestTasksSDKClient: the TypeScript SDK 1.x client's experimental tasks
// API runs a tool as a task through the aggregator (over HTTP, once the
// servers are up, since initialize tells what is up then): it sees the
// tasks capability and the tool's task support, follows the task to its
// result by polling, and lists and gets it, all under the aggregator's id.
func TestTasksSDKClient(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, tasksConfig(t))
	a.waitLoaded()
	stdout, stderr, err := runMarkedNode(t, newMarker(), strings.NewReader(`{"tool":"b_countdown","arguments":{"label":"sdk","steps":2,"stepMs":50}}`),
		"taskclient.mjs", "--http", a.url)
	require.NoError(t, err, "taskclient failed; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr)

	var out struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		Messages     []struct {
			Type   string          `json:"type"`
			Task   *taskObject     `json:"task"`
			Result json.RawMessage `json:"result"`
			Error  string          `json:"error"`
		} `json:"messages"`
		Listed    []taskObject `json:"listed"`
		Got       taskObject   `json:"got"`
		FatalStep string       `json:"fatalStep"`
		Fatal     string       `json:"fatal"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "taskclient output: %s", stdout.String())
	require.Empty(t, out.Fatal)
	require.Empty(t, out.FatalStep, "stderr:\n%s", stderr)
	assert.Contains(t, out.Capabilities, "tasks")
	require.NotEmpty(t, out.Messages)
	first, last := out.Messages[0], out.Messages[len(out.Messages)-1]
	require.Equal(t, "taskCreated", first.Type, "%+v", out.Messages)
	id := first.Task.TaskID
	assert.True(t, strings.HasPrefix(id, "task-") && id != "task-1", "the aggregator's id: %s", id)
	require.Equal(t, "result", last.Type, "the stream ends with the task's result: %+v", out.Messages)
	assert.Equal(t, "sdk done after 2 steps", firstText(t, last.Result))
	for _, m := range out.Messages {
		if m.Task != nil {
			assert.Equal(t, id, m.Task.TaskID, "every status the client sees names its id")
		}
	}
	require.Len(t, out.Listed, 1)
	assert.Equal(t, id, out.Listed[0].TaskID)
	assert.Equal(t, "completed", out.Listed[0].Status)
	assert.Equal(t, id, out.Got.TaskID)
	assert.Equal(t, "completed", out.Got.Status)
}

// taskServerHTTP runs node/taskserver.mjs as a streamable HTTP server on a
// free loopback port and returns its URL.
func taskServerHTTP(t *testing.T) string {
	t.Helper()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	port := freePort(t)
	cmd := exec.Command("node", filepath.Join(nodeDir, "taskserver.mjs"), "--http")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	log, exited := startProcessGroup(t, cmd)
	_, ok := log.waitLine(func(line string) bool { return strings.Contains(line, fmt.Sprintf("listening on 127.0.0.1:%d", port)) }, startTimeout, exited)
	require.True(t, ok, "taskserver --http never said it listens on %d:\n%s", port, log)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// forEachTaskUpstream runs test in a parallel subtest for each of
// taskUpstreams whose name starts with prefix, with the aggregator serving it
// over tr, loaded.
func forEachTaskUpstream(t *testing.T, tr transport, prefix string, test func(t *testing.T, a *aggregator)) {
	t.Helper()
	for _, up := range taskUpstreams() {
		if !strings.HasPrefix(up.name, prefix) {
			continue
		}
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			a := serveConfig(t, tr, up.config(t))
			a.waitLoaded()
			test(t, a)
		})
	}
}

// taskUpstream is one way to run node/taskserver.mjs behind the aggregator,
// as server alpha with the prefix a_.
type taskUpstream struct {
	name   string
	config func(t *testing.T) string
}

func taskUpstreams() []taskUpstream {
	stdio := func(shared bool) func(t *testing.T) string {
		return func(t *testing.T) string {
			nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
			return "version: 1\nservers:\n" + taskServerEntry("alpha", "a_", fmt.Sprintf("truely-stateless: %t", shared))
		}
	}
	remote := func(shared bool) func(t *testing.T) string {
		return func(t *testing.T) string {
			return fmt.Sprintf(`version: 1
servers:
  alpha:
    transport: streamable_http
    url: %s
    truely-stateless: %t
    transform: [{prefix: a_}]
`, quoted(taskServerHTTP(t)), shared)
		}
	}
	return []taskUpstream{
		{"stdio-shared", stdio(true)},
		{"stdio-leased", stdio(false)},
		{"http-shared", remote(true)},
		{"http-leased", remote(false)},
	}
}

// notesText renders notifications for a failure message.
func notesText(notes []notification) string {
	var b strings.Builder
	for _, n := range notes {
		fmt.Fprintf(&b, "\n  %s %s", n.Method, n.Params)
	}
	return b.String()
}

// aggProgressToken is the progress token the aggregator gives an upstream
// in place of the client's.
var aggProgressToken = regexp.MustCompile(`"progressToken":"agg-[0-9]+"`)

// TestTasksProgressAfterResult: the progress token of a task-augmented call
// stays valid for the task's lifetime. The upstream reports progress and log
// messages about its task after the CreateTaskResult, with no request in
// flight; they reach the session that owns the task, and only it, byte for
// byte as the upstream sent them but for the progress token (the client's)
// and the task id in the related-task _meta (the client's). Progress
// without _meta gains none, from an HTTP upstream too. With early, the
// upstream sends a progress and a log message naming the task before its
// CreateTaskResult: they are held until the result maps the id, then
// delivered to the owner, first.
func TestTasksProgressAfterResult(t *testing.T) {
	t.Parallel()
	for _, up := range taskUpstreams() {
		for _, early := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/early=%t", up.name, early), func(t *testing.T) {
				t.Parallel()
				testTaskProgressAfterResult(t, up, early)
			})
		}
	}
}

func testTaskProgressAfterResult(t *testing.T, up taskUpstream, early bool) {
	a := serveConfig(t, httpTransport, up.config(t))
	a.waitLoaded()
	owner, other := a.newClient(), a.newClient()
	for _, c := range []*client{owner, other} {
		c.initializeWith(map[string]any{})
		listen(t, a, c)
	}
	const steps = 4
	resp := owner.mustRequest("tools/call", map[string]any{
		"name":      "a_reporter",
		"arguments": map[string]any{"label": "rep", "steps": steps, "stepMs": 50, "early": early},
		"task":      map[string]any{"ttl": 60000},
		"_meta":     map[string]any{"progressToken": "p-7"},
	})
	require.Empty(t, string(resp.Error), "tools/call a_reporter as a task")
	var created struct {
		Task taskObject `json:"task"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &created))
	id := created.Task.TaskID
	require.True(t, strings.HasPrefix(id, "task-") && id != "task-1", "the aggregator's id: %s", id)

	// Everything arrives with no request of the client in flight.
	isProgress := func(n notification) bool {
		return n.Method == "notifications/progress" && strings.Contains(string(n.Params), `"progressToken":"p-7"`)
	}
	isReport := func(n notification) bool {
		return n.Method == "notifications/message" && strings.Contains(string(n.Params), `"logger":"reporter"`)
	}
	_, ok := owner.waitNotification(func(n notification) bool {
		return isProgress(n) && strings.Contains(string(n.Params), fmt.Sprintf(`"progress":%d,`, steps))
	}, callTimeout)
	require.True(t, ok, "the last progress reached the owner after the CreateTaskResult; got %s", notesText(owner.inboxNotes()))
	_, ok = owner.waitNotification(func(n notification) bool {
		return isReport(n) && strings.Contains(string(n.Params), fmt.Sprintf("step %d of", steps))
	}, callTimeout)
	require.True(t, ok, "the last log message reached the owner; got %s", notesText(owner.inboxNotes()))

	res := owner.mustRequest("tasks/result", map[string]any{"taskId": id})
	require.Empty(t, string(res.Error), "tasks/result")
	sent := 2 * steps
	if early {
		sent += 2
	}
	upstreamSent := sentByUpstream(t, res.Result)
	require.Len(t, upstreamSent, sent, "what the upstream sent: %s", res.Result)

	// The upstream's own bytes, with the mapped token and id.
	var wantProgress, wantReports []string
	for _, raw := range upstreamSent {
		want := strings.ReplaceAll(string(raw), `"taskId":"task-1"`, `"taskId":"`+id+`"`)
		if aggProgressToken.MatchString(want) {
			wantProgress = append(wantProgress, aggProgressToken.ReplaceAllString(want, `"progressToken":"p-7"`))
		} else {
			wantReports = append(wantReports, want)
		}
	}
	var gotProgress, gotReports []string
	for _, n := range owner.inboxNotes() {
		switch {
		case isProgress(n):
			gotProgress = append(gotProgress, string(n.Params))
		case isReport(n):
			gotReports = append(gotReports, string(n.Params))
		}
	}
	assert.Equal(t, wantProgress, gotProgress, "progress passes byte for byte but for the token and task id")
	assert.Equal(t, wantReports, gotReports, "log messages pass byte for byte but for the task id")
	for i := range min(len(wantProgress), len(gotProgress)) {
		assert.JSONEq(t, wantProgress[i], gotProgress[i])
	}
	for _, p := range gotProgress {
		if !strings.Contains(p, "related-task") {
			assert.NotContains(t, p, `"_meta"`, "progress without _meta gains none")
		}
	}
	// A log message that names no task is any session's on a shared
	// instance; one that names the task, and the call's progress, are not.
	for _, n := range other.inboxNotes() {
		assert.False(t, n.Method == "notifications/progress" || strings.Contains(string(n.Params), "related-task"),
			"another session hears nothing of the task: %s %s", n.Method, n.Params)
	}
}

// TestTasksStatusBeforeResult: an upstream that announces its task
// (notifications/tasks/status) before it answers the call with the
// CreateTaskResult: the status reaches the owner under the client's id.
func TestTasksStatusBeforeResult(t *testing.T) {
	t.Parallel()
	forEachTaskUpstream(t, httpTransport, "", func(t *testing.T, a *aggregator) {
		owner, other := a.newClient(), a.newClient()
		for _, c := range []*client{owner, other} {
			c.initializeWith(map[string]any{})
			listen(t, a, c)
		}
		resp := owner.mustRequest("tools/call", map[string]any{
			"name": "a_eager", "arguments": map[string]any{"label": "eager", "stepMs": 200}, "task": map[string]any{"ttl": 60000},
		})
		require.Empty(t, string(resp.Error))
		var created struct {
			Task json.RawMessage `json:"task"`
		}
		require.NoError(t, json.Unmarshal(resp.Result, &created))
		var task taskObject
		require.NoError(t, json.Unmarshal(created.Task, &task))
		require.Equal(t, "accepted", task.StatusMessage)
		n, ok := owner.waitNotification(func(n notification) bool {
			return n.Method == "notifications/tasks/status" && strings.Contains(string(n.Params), `"accepted"`)
		}, callTimeout)
		require.True(t, ok, "the status sent before the CreateTaskResult reached the owner; got %s", notesText(owner.inboxNotes()))
		assert.JSONEq(t, string(created.Task), string(n.Params), "the same Task, under the client's id")

		res := owner.mustRequest("tasks/result", map[string]any{"taskId": task.TaskID})
		require.Empty(t, string(res.Error))
		assert.Equal(t, "eager done", firstText(t, res.Result))
		for _, n := range other.inboxNotes() {
			assert.NotEqual(t, "notifications/tasks/status", n.Method, "another session hears nothing: %s", n.Params)
		}
	})
}

// assertReporterAnswered checks result, the result of taskserver's reporter
// task that asked, for the answer it got: accepted, naming the task by the
// upstream's id (task-1).
func assertReporterAnswered(t *testing.T, result json.RawMessage) {
	t.Helper()
	var r struct {
		Structured struct {
			Answer struct {
				Action        string `json:"action"`
				RelatedTaskID string `json:"relatedTaskId"`
			} `json:"answer"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(result, &r), "%s", result)
	assert.Equal(t, "accept", r.Structured.Answer.Action, "the client's answer reached the upstream: %s", result)
	assert.Equal(t, "task-1", r.Structured.Answer.RelatedTaskID, "the answer names the task by the upstream's id")
}

// TestTasksRelatedRequest: after the CreateTaskResult, with no request of
// the client in flight, the upstream asks the client (elicitation/create)
// naming its task in _meta; the request reaches the task's owner under the
// client's id, on a leased and on a shared instance alike, and the
// client's answer, which names the task by the client's id, reaches the
// upstream under the upstream's.
func TestTasksRelatedRequest(t *testing.T) {
	t.Parallel()
	forEachTaskUpstream(t, stdioTransport, "", func(t *testing.T, a *aggregator) {
		c, asked := elicitedClient(a, func(params json.RawMessage) string {
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			_ = json.Unmarshal(params, &p)
			related := p.Meta["io.modelcontextprotocol/related-task"]
			return `{"action":"accept","content":{"keep":true},"_meta":{"io.modelcontextprotocol/related-task":` + string(related) + `}}`
		})
		task := startTask(t, c, "a_reporter", map[string]any{"label": "ask", "steps": 1, "stepMs": 10, "ask": true})

		var params json.RawMessage
		select {
		case params = <-asked:
		case <-time.After(callTimeout):
			t.Fatal("the client was never asked")
		}
		assert.Equal(t, task.TaskID, relatedTaskID(t, params), "the request names the task by the client's id")

		res := c.mustRequest("tasks/result", map[string]any{"taskId": task.TaskID})
		require.Empty(t, string(res.Error))
		assertReporterAnswered(t, res.Result)
	})
}

// TestTasksHTTPProgressFidelity: an ordinary call's progress from a
// streamable HTTP upstream reaches the client on the call's stream byte for
// byte as the upstream sent it, but for the progress token (the client's):
// in particular no empty "_meta" is added.
func TestTasksHTTPProgressFidelity(t *testing.T) {
	t.Parallel()
	forEachTaskUpstream(t, httpTransport, "http-", func(t *testing.T, a *aggregator) {
		c := a.newClient()
		c.initializeWith(map[string]any{})
		const steps = 5
		resp := c.mustRequest("tools/call", map[string]any{
			"name": "a_ticker", "arguments": map[string]any{"steps": steps}, "_meta": map[string]any{"progressToken": 42},
		})
		require.Empty(t, string(resp.Error), "tools/call a_ticker")
		upstreamSent := sentByUpstream(t, resp.Result)
		require.Len(t, upstreamSent, steps, "%s", resp.Result)
		var want, got []string
		for _, raw := range upstreamSent {
			want = append(want, aggProgressToken.ReplaceAllString(string(raw), `"progressToken":42`))
		}
		for _, n := range c.inboxNotes() {
			if n.Method == "notifications/progress" {
				got = append(got, string(n.Params))
			}
		}
		assert.Equal(t, want, got, "progress passes byte for byte but for the token")
		for _, p := range got {
			assert.NotContains(t, p, `"_meta"`, "no _meta is added")
		}
	})
}
