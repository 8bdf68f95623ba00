package proxy

import (
	"context"
	"encoding/json"

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
	var timeout timeLimit
	if rs := p.current().servers[server]; rs != nil {
		timeout = requestLimit(rs.cfg)
	}
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
	if bad := leaseNameError(req, meta); bad != nil {
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
	var timeout timeLimit
	if rs := p.current().servers[e.Server]; rs != nil {
		timeout = requestLimit(rs.cfg)
	}
	raw, rpcErr, respond := p.onTaskInstance(upstream.WithTasksExtension(ctx), req, e, method, params, timeout, false)
	switch {
	case !respond:
		return nil
	case rpcErr != nil:
		if method == "tasks/get" && rpcErr.Code == jsonrpc.CodeInvalidParams {
			p.tasks.Remove(e) // the upstream no longer has it
		}
		return &jsonrpc.Message{Error: taskIDsToClient(rpcErr, e)}
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
