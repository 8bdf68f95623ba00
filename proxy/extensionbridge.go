package proxy

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// A 2025-11-25 session's task on a server that speaks the tasks extension
// (2026-07-28) instead. The session's task-augmented tools/call goes up
// without params.task, declaring the extension; a task handle becomes the
// session's CreateTaskResult (ttlMs as ttl, pollIntervalMs as
// pollInterval, the aggregator's id). tasks/get asks the upstream and
// answers its Task as 2025-11-25's; tasks/cancel cancels it upstream and
// answers the Task as it then is; tasks/result polls the upstream's
// tasks/get (from the task's pollIntervalMs, doubling up to
// maxResultPoll, bounded by the tool's call timeout) until the task ends,
// asking the session what the task's inputRequests ask (elicitation,
// sampling, roots, each naming the task in its related-task _meta) and
// answering them upstream with tasks/update.

const (
	minResultPoll = 50 * time.Millisecond
	maxResultPoll = 5 * time.Second
)

// offersTasksExtension reports whether rs's upstream declares the tasks
// extension.
func offersTasksExtension(rs *runningServer) bool {
	return rs != nil && present(rawjson.Member(rawjson.Member(rs.caps.Raw, "extensions"), TasksExtension))
}

// legacyTask is the extension's Task as 2025-11-25's: ttlMs as ttl,
// pollIntervalMs as pollInterval, without resultType and the state the
// extension inlines (result, error, inputRequests).
func legacyTask(task json.RawMessage) json.RawMessage {
	return appendRenamed([]byte{'{'}, task, func(name string) (string, bool) {
		switch name {
		case "ttlMs":
			return "ttl", true
		case "pollIntervalMs":
			return "pollInterval", true
		case "resultType", "result", "error", "inputRequests", "_meta":
			return "", false
		}
		return name, true
	})
}

// appendRenamed appends to out, an object begun ('{' and the members it
// has so far), each member of obj under the name rename gives it, less
// those it drops, and closes the object.
func appendRenamed(out []byte, obj json.RawMessage, rename func(name string) (string, bool)) []byte {
	members := rawjson.NewObject(obj)
	for members.Next() {
		if name, keep := rename(string(members.Name())); keep {
			out = appendMember(out, name, members.Value())
		}
	}
	return append(out, '}')
}

// appendMember appends the member name: value to out, an object begun
// ('{' and the members it has so far).
func appendMember(out []byte, name string, value []byte) []byte {
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = rawjson.AppendString(out, name)
	out = append(out, ':')
	return append(out, value...)
}

// extensionTaskCreated records the task of handle, an upstream's task
// handle answering a session's task-augmented call, and returns the
// session's CreateTaskResult.
func (p *Proxy) extensionTaskCreated(res *tasks.Reservation, server string, inst *upstream.Instance, lease session.Key, timeout timeLimit, handle json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	upID, ok := tasks.StringAt(handle, tasks.IDPath)
	if !ok {
		return nil, errorObject(codeInternal, "server %q answered with a task (resultType \"task\") without a taskId", server)
	}
	ttl, hasTTL := tasks.TTLMs(handle)
	e, err := p.tasks.Add(res, &tasks.Entry{UpstreamID: upID, Server: server, Inst: inst, Lease: lease,
		Timeout: timeout.d, TimeoutSetting: timeout.setting, Keep: tasks.KeepFor(ttl, hasTTL)})
	if err != nil {
		p.cancelUpstreamTasks([]*tasks.Entry{{UpstreamID: upID, Server: server, Inst: inst}}, "a task no client can reach cancelled")
		return nil, errorObject(codeInternal, "server %q answered with a task, and it was cancelled: %v", server, err)
	}
	p.tasks.Touch(e, tasks.Terminal(handle))
	mapped, _ := tasks.MapStringAt(handle, tasks.IDPath, tasks.SetString(e.ID))
	out := []byte(`{"task":`)
	out = append(out, legacyTask(mapped)...)
	return append(out, '}'), nil
}

// sessionExtensionTaskRequest serves a session's tasks/get, tasks/result
// and tasks/cancel of e, a task of a server that speaks the extension.
func (p *Proxy) sessionExtensionTaskRequest(ctx context.Context, req *downstream.Request, e *tasks.Entry, timeout timeLimit) *jsonrpc.Message {
	method := req.Msg.Method
	ctx = upstream.WithTasksExtension(ctx)
	params := rawjson.AppendString([]byte(`{"taskId":`), e.UpstreamID)
	params = append(params, '}')
	get := func() (json.RawMessage, *jsonrpc.Message) {
		raw, rpcErr, respond := p.onTaskInstance(ctx, req, e, "tasks/get", params, timeout, false)
		switch {
		case !respond:
			return nil, nil
		case rpcErr != nil:
			if rpcErr.Code == jsonrpc.CodeInvalidParams {
				p.tasks.Remove(e)
			}
			return nil, &jsonrpc.Message{Error: taskIDsToClient(rpcErr, e)}
		}
		p.tasks.Touch(e, tasks.Terminal(raw))
		raw, _ = tasks.MapStringAt(raw, tasks.IDPath, func(old string) (string, bool) { return e.ID, old == e.UpstreamID })
		return raw, nil
	}
	switch method {
	case "tasks/cancel":
		if _, rpcErr, respond := p.onTaskInstance(ctx, req, e, "tasks/cancel", params, timeout, false); !respond {
			return nil
		} else if rpcErr != nil {
			return &jsonrpc.Message{Error: taskIDsToClient(rpcErr, e)}
		}
		fallthrough
	case "tasks/get":
		raw, bad := get()
		if raw == nil {
			return bad
		}
		return answer(legacyTask(raw))
	}
	// tasks/result: poll until the task ends.
	limit := e.Timeout
	if limit <= 0 {
		limit = serverRequestTimeout
	}
	deadline := time.Now().Add(limit)
	wait := minResultPoll
	for {
		raw, bad := get()
		if raw == nil {
			return bad
		}
		status, _ := tasks.StringAt(raw, []string{"status"})
		switch status {
		case "completed":
			return answer(withRelatedTask(rawjson.Member(raw, "result"), e.ID))
		case "failed":
			var rpcErr jsonrpc.Error
			if err := json.Unmarshal(rawjson.Member(raw, "error"), &rpcErr); err != nil || rpcErr.Message == "" {
				return failure(codeInternal, "tasks/result: task %q failed on server %q", e.ID, e.Server)
			}
			return &jsonrpc.Message{Error: taskIDsToClient(&rpcErr, e)}
		case "cancelled":
			return failure(codeInternal, "tasks/result: task %q was cancelled", e.ID)
		case "input_required":
			if bad := p.answerInputRequests(ctx, req, e, params, timeout, rawjson.Member(raw, "inputRequests")); bad != nil {
				return bad
			}
			wait = minResultPoll
			continue
		}
		var asks float64
		if json.Unmarshal(rawjson.Member(raw, "pollIntervalMs"), &asks) == nil && time.Duration(asks)*time.Millisecond > wait {
			wait = min(time.Duration(asks)*time.Millisecond, maxResultPoll)
		}
		if time.Now().Add(wait).After(deadline) {
			return failure(codeInternal, "tasks/result: task %q did not end within %s (%s); the task goes on: poll tasks/get, call tasks/result again, or raise %s", e.ID, limit, e.TimeoutSetting, e.TimeoutSetting)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		wait = min(wait*2, maxResultPoll)
	}
}

// answerInputRequests asks the session of req what requests, a task's
// inputRequests, ask, and sends the answers up with tasks/update.
func (p *Proxy) answerInputRequests(ctx context.Context, req *downstream.Request, e *tasks.Entry, params json.RawMessage, timeout timeLimit, requests json.RawMessage) *jsonrpc.Message {
	var asked map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(requests, &asked); err != nil || len(asked) == 0 {
		return failure(codeInternal, "tasks/result: task %q needs input, and server %q said not what (no inputRequests)", e.ID, e.Server)
	}
	if len(asked) > maxHeldInputs {
		return failure(codeInternal, "tasks/result: task %q asks %d requests at once; the aggregator relays at most %d", e.ID, len(asked), maxHeldInputs)
	}
	send := req.Ask
	if send == nil && req.Session != nil {
		send = req.Session.Request
	}
	responses := []byte{'{'}
	for key, r := range asked {
		out := r.Params
		if len(out) == 0 {
			out = []byte(`{}`)
		}
		out = withRelatedTask(out, e.ID)
		result, rpcErr := ask(ctx, req.ClientCapabilities, send, r.Method, out)
		if rpcErr != nil {
			return &jsonrpc.Message{Error: rpcErr}
		}
		responses = appendMember(responses, key, rawjson.Without(result, "_meta"))
	}
	responses = append(responses, '}')
	update := rawjson.Add(params, "inputResponses", responses)
	if _, rpcErr, respond := p.onTaskInstance(ctx, req, e, "tasks/update", update, timeout, false); !respond {
		return nil
	} else if rpcErr != nil {
		return &jsonrpc.Message{Error: taskIDsToClient(rpcErr, e)}
	}
	return nil
}

// withRelatedTask is msg with its related-task _meta naming task id.
func withRelatedTask(msg json.RawMessage, id string) json.RawMessage {
	related := rawjson.AppendString([]byte(`{"taskId":`), id)
	related = append(related, '}')
	meta := rawjson.Member(msg, "_meta")
	if meta == nil {
		meta = []byte(`{}`)
	}
	meta, _ = rawjson.Set(meta, tasks.RelatedTaskKey, func([]byte) []byte { return related })
	out, ok := rawjson.Set(msg, "_meta", func([]byte) []byte { return meta })
	if !ok {
		return msg
	}
	return out
}

// extensionServers is the servers of st that speak the tasks extension and
// client's profile admits.
func extensionServers(st *state, client string) map[string]bool {
	pr := st.profileOf(client)
	var out map[string]bool
	for _, id := range st.order {
		if rs := st.servers[id]; offersTasksExtension(rs) && pr.server(id) {
			if out == nil {
				out = map[string]bool{}
			}
			out[id] = true
		}
	}
	return out
}

// optionalTaskSupport is the execution member a 2025-11-25 session sees on
// a tool of a server that speaks the tasks extension: any of its tools may
// run as a task, which the bridge above carries.
var optionalTaskSupport = []byte(`{"taskSupport":"optional"}`)

// withExtensionTaskSupport is body, a tools/list result for a 2025-11-25
// session, with execution.taskSupport "optional" on each tool of a server
// in ext that says nothing of it; every other byte as it is.
func withExtensionTaskSupport(st *state, ext map[string]bool, body []byte) []byte {
	if len(ext) == 0 {
		return body
	}
	out, _ := rawjson.EditItems(body, "tools", func(item []byte) ([]byte, bool) {
		name, ok := rawjson.String(rawjson.Member(item, "name"))
		if !ok {
			return nil, false
		}
		entry, ok := st.catalog.Lookup(name)
		if !ok || !ext[entry.Server] {
			return nil, false
		}
		execution := rawjson.Member(item, "execution")
		if rawjson.Has(execution, "taskSupport") {
			return nil, false
		}
		if execution == nil || string(execution) == "null" {
			edited, ok := rawjson.Set(item, "execution", func([]byte) []byte { return optionalTaskSupport })
			return edited, ok
		}
		edited, ok := rawjson.Replace(item, "execution", func(old []byte) ([]byte, bool) {
			return rawjson.Add(old, "taskSupport", []byte(`"optional"`)), true
		})
		return edited, ok
	})
	return out
}
