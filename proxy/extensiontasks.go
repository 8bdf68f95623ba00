package proxy

import (
	"context"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks) is
// relayed to sessionless clients that declare it on their request. Such a
// tools/call declares the extension to the upstream (a 2026-07-28 one: the
// request's _meta client capabilities), which may then answer with a task
// handle, resultType "task"; its taskId is replaced by one of the
// aggregator's, recorded with the caller's Session (its principal and
// conversation: the lease key) and the instance that runs the task.
// tasks/get, tasks/update and tasks/cancel go to that instance under the
// upstream's id, the answer comes back under the aggregator's, and a task
// of another principal, or of another conversation when the request names
// one, is not found, exactly as one that never was. The bounds are the
// task table's: per conversation, per client, overall, and each task kept
// for its ttlMs (see tasks.KeepFor).

// declaresTasksExtension reports whether req may be answered with a task
// handle: a sessionless request whose client declared the extension on it.
func declaresTasksExtension(req *downstream.Request) bool {
	return req != nil && protocol.Modern(req.Protocol) &&
		present(rawjson.Member(rawjson.Member(req.ClientCapabilities, "extensions"), TasksExtension))
}

// isTaskHandle reports whether a result is a CreateTaskResult of the
// tasks extension.
func isTaskHandle(raw json.RawMessage) bool {
	kind, _ := rawjson.String(rawjson.Member(raw, "resultType"))
	return kind == "task"
}

// taskHandle records the task of an upstream's task handle, a tools/call
// result, and returns the handle with the aggregator's id in place of the
// upstream's. A handle the caller did not ask for (it did not declare the
// extension), or one that cannot be recorded, is an error to the client,
// and the upstream's task is cancelled (best effort): nobody could reach
// it.
func (p *Proxy) taskHandle(inv invocation, server string, inst *upstream.Instance, raw json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	upID, ok := tasks.StringAt(raw, tasks.IDPath)
	if !ok {
		return nil, errorObject(codeInternal, "%s: the server answered with a task (resultType \"task\") without a taskId", inv.subject(server))
	}
	fail := func(format string, args ...any) (json.RawMessage, *jsonrpc.Error) {
		p.cancelUpstreamTasks([]*tasks.Entry{{UpstreamID: upID, Server: server, Inst: inst}}, "a task no client can reach cancelled")
		return nil, errorObject(codeInternal, format, args...)
	}
	if !declaresTasksExtension(inv.req) {
		return fail("%s: the server answered with a task (resultType \"task\") though the request did not declare the %s extension; the task was cancelled", inv.subject(server), TasksExtension)
	}
	s, err := p.requestSession(inv.req, inv.key)
	if err != nil {
		return fail("%s: the server answered with a task, and it was cancelled: %v", inv.subject(server), err)
	}
	res, err := p.tasks.Reserve(s.taskOwner(), holderOf(inv.req))
	if err != nil {
		return fail("%s: the server answered with a task, and it was cancelled: %v", inv.subject(server), err)
	}
	defer p.tasks.Release(res)
	timeout := p.serverRequestLimit(server)
	ttl, hasTTL := tasks.TTLMs(raw)
	e, err := p.tasks.Add(res, &tasks.Entry{UpstreamID: upID, Server: server, Inst: inst, Lease: inv.key,
		Timeout: timeout.d, TimeoutSetting: timeout.setting, Keep: tasks.KeepFor(ttl, hasTTL)})
	if err != nil {
		return fail("%s: the server answered with a task, and it was cancelled: %v", inv.subject(server), err)
	}
	out, _ := tasks.MapStringAt(raw, tasks.IDPath, tasks.SetString(e.ID))
	p.tasks.Touch(e, tasks.Terminal(raw))
	p.log.Debug("task created", "server", server, "task", e.ID, "extension", TasksExtension)
	if s.ended() {
		// The conversation ended while the call ran: its tasks went before
		// this one was added. It goes the same way.
		p.tasksEnded(s.taskOwner())
	}
	return out, nil
}

// extensionTaskRequest serves tasks/get, tasks/update and tasks/cancel of
// the tasks extension: the caller's id is mapped to the upstream's, the
// request goes to the instance that runs the task, and the answer comes
// back with the ids mapped back. A request that names its conversation
// (LeaseMetaKey) finds that conversation's tasks; one that names none
// finds any of its principal's.
func (p *Proxy) extensionTaskRequest(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	method := req.Msg.Method
	id, ok := tasks.StringAt(req.Msg.Params, tasks.IDPath)
	if !ok {
		return failure(jsonrpc.CodeInvalidParams, "%s needs params.taskId (a string)", method)
	}
	meta := requestMeta(req.Msg.Params)
	if bad := leaseNameError(req, meta[LeaseMetaKey]); bad != nil {
		return bad
	}
	key, _ := LeaseKeyOf(req, meta)
	e, ok := p.tasks.Find(id, func(owner session.Key) bool {
		if owner.Client != key.Client || owner.Kind == session.KeySession {
			return false
		}
		return key.Kind != session.KeyNamed || owner == key
	})
	if !ok || !p.admits(req.Profile, e.Server) {
		return failure(jsonrpc.CodeInvalidParams, "%s: task %q not found: no task of this client has that id (it may have expired, or the conversation that created it ended)", method, id)
	}
	params, _ := tasks.MapStringAt(upstreamParams(req.Msg.Params, meta), tasks.IDPath, tasks.SetString(e.UpstreamID))
	timeout := p.serverRequestLimit(e.Server)
	if !protocol.Modern(e.Inst.Protocol()) {
		return p.bridgedTaskRequest(ctx, req, e, params, timeout)
	}
	raw, reply, ok := p.forwardTaskRequest(upstream.WithTasksExtension(ctx), req, e, method, params, timeout, false)
	if !ok {
		return reply
	}
	p.tasks.Touch(e, tasks.Terminal(raw))
	raw, _ = tasks.MapStringAt(raw, tasks.IDPath, func(old string) (string, bool) { return e.ID, old == e.UpstreamID })
	return answer(raw)
}

// ended reports whether Close came.
func (s *Session) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ownerGone reports whether the Session that owns tasks under key ended: a
// downstream session no longer registered, a conversation out of the
// registry.
func (p *Proxy) ownerGone(key session.Key) bool {
	if _, ok := key.SessionID(); ok {
		return p.clients.session(key) == nil
	}
	s := p.sessions.findConversation(key)
	return s == nil || s.ended()
}

// A sessionless client that declares the extension, calling a tool of a
// 2025-11-25 server that runs it as a task (the server declares task-
// augmented tools/call, the tool's execution.taskSupport is "optional" or
// "required"), gets the extension's task all the same: the call goes up
// task-augmented, and its CreateTaskResult comes back as a task handle;
// tasks/get asks the upstream for the task and, once it ended, for its
// result (tasks/result), which it carries as the extension's Task does;
// tasks/cancel acknowledges empty. What the upstream asks during a task
// shows among the task's inputRequests, and tasks/update answers it
// (bridgedinput.go).

// bridgesTask reports whether a call of req to entry, a tool of rs on
// inst, runs as a 2025-11-25 task for the tasks extension.
func (p *Proxy) bridgesTask(req *downstream.Request, rs *runningServer, inst *upstream.Instance, entry *catalog.Entry) bool {
	return entry != nil && entry.TaskSupport && rs.taskCalls && declaresTasksExtension(req) && !protocol.Modern(inst.Protocol())
}

// tasksCall reports whether caps declare task-augmented tools/call
// (tasks.requests.tools.call).
func tasksCall(caps upstream.Capabilities) bool {
	return caps.Tasks && present(rawjson.Member(rawjson.Member(rawjson.Member(rawjson.Member(caps.Raw, "tasks"), "requests"), "tools"), "call"))
}

// extensionHandle is the task handle of the tasks extension for created,
// a 2025-11-25 CreateTaskResult (ids mapped already).
func extensionHandle(created json.RawMessage) json.RawMessage {
	return extensionTask(rawjson.Member(created, "task"), "task")
}

// extensionTask is a 2025-11-25 Task as the extension's: resultType set
// (left out when ""), ttl as ttlMs and pollInterval as pollIntervalMs,
// every other member as it is.
func extensionTask(task json.RawMessage, resultType string) json.RawMessage {
	out := []byte{'{'}
	if resultType != "" {
		out = append(out, `"resultType":`...)
		out = rawjson.AppendString(out, resultType)
	}
	return appendRenamed(out, task, func(name string) (string, bool) {
		switch name {
		case "ttl":
			return "ttlMs", true
		case "pollInterval":
			return "pollIntervalMs", true
		case "resultType":
			return "", false
		}
		return name, true
	})
}

// bridgedTaskRequest serves tasks/get, tasks/update and tasks/cancel of the
// extension for task e, which a 2025-11-25 upstream runs; params carry the
// upstream's id.
func (p *Proxy) bridgedTaskRequest(ctx context.Context, req *downstream.Request, e *tasks.Entry, params json.RawMessage, timeout timeLimit) *jsonrpc.Message {
	method := req.Msg.Method
	if method == "tasks/update" {
		responses, bad := inputResponsesOf(req.Msg.Params)
		if bad != "" {
			return failure(jsonrpc.CodeInvalidParams, "%s", bad)
		}
		p.answerHeldInputs(e, responses)
		return answer([]byte(`{}`))
	}
	raw, reply, ok := p.forwardTaskRequest(ctx, req, e, method, params, timeout, false)
	if !ok {
		return reply
	}
	ended := tasks.Terminal(raw)
	p.tasks.Touch(e, ended)
	if method == "tasks/cancel" {
		p.dropHeldInputs(e)
		return answer([]byte(`{}`))
	}
	raw, _ = tasks.MapStringAt(raw, tasks.IDPath, func(old string) (string, bool) { return e.ID, old == e.UpstreamID })
	out := extensionTask(raw, "complete")
	status, _ := tasks.StringAt(raw, []string{"status"})
	if !ended {
		// What the task waits on: the requests held for it, or, when the
		// upstream says it waits on input and none came, those that a
		// tasks/result brings.
		held := p.heldInputRequests(e)
		if held == nil && status == "input_required" {
			p.drainTaskInput(e)
			held = p.heldInputRequests(e)
		}
		if held != nil {
			out, _ = rawjson.Replace(out, "status", func([]byte) ([]byte, bool) { return []byte(`"input_required"`), true })
			out = rawjson.Add(out, "inputRequests", held)
		}
	}
	if ended && status != "cancelled" {
		// The extension's Task carries what tasks/result would return.
		result, resErr, respond := p.onTaskInstance(ctx, req, e, "tasks/result", params, timeLimit{d: e.Timeout, setting: e.TimeoutSetting}, false)
		switch {
		case !respond:
			return nil
		case resErr != nil:
			data, _ := json.Marshal(taskIDsToClient(resErr, e))
			out, _ = rawjson.Replace(out, "status", func([]byte) ([]byte, bool) { return []byte(`"failed"`), true })
			out = rawjson.Add(out, "error", data)
		default:
			out = rawjson.Add(out, "result", p.relatedToClient(result, e.Inst, e.Owner))
		}
	}
	return answer(out)
}
