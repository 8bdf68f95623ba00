package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Tasks (protocol 2025-11-25, experimental) pass through: a task-augmented
// tools/call goes to the tool's server like any call, and the task id in
// its CreateTaskResult is replaced by one of the aggregator's own, recorded
// with the session that made the call and the instance that runs the task.
// tasks/get, tasks/result and tasks/cancel go to that instance under the
// upstream's id; tasks/list shows a session its own tasks only; the
// upstream's notifications/tasks/status reach the owner only. Everywhere
// the client sees the aggregator's ids, and an id of another session is
// not found, exactly as one that never was. The call's progress token
// outlives the call, as long as the task; what the upstream says about a
// task (related-task _meta) goes to the task's owner, mapped both ways.

// taskListConcurrency bounds the tasks/get requests one tasks/list page
// sends at once.
const taskListConcurrency = 8

// taskCancelOnCloseTimeout bounds each tasks/cancel sent for the tasks of a
// session that ended.
const taskCancelOnCloseTimeout = 5 * time.Second

// tasksCapability is the tasks capability the enabled servers of client's
// profile offer together, or nil: tasks/list and tasks/cancel where any
// declares them, task-augmented tools/call where any declares it.
func (p *Proxy) tasksCapability(client string) map[string]any {
	st := p.current()
	pr := st.profileOf(client)
	var list, cancel, toolsCall bool
	for _, id := range st.order {
		rs := st.servers[id]
		if rs == nil || !rs.caps.Tasks || !pr.server(id) {
			continue
		}
		tasks := rawjson.Member(rs.caps.Raw, "tasks")
		list = list || present(rawjson.Member(tasks, "list"))
		cancel = cancel || present(rawjson.Member(tasks, "cancel"))
		toolsCall = toolsCall || present(rawjson.Member(rawjson.Member(rawjson.Member(tasks, "requests"), "tools"), "call"))
	}
	if !list && !cancel && !toolsCall {
		return nil
	}
	caps := map[string]any{}
	if list {
		caps["list"] = map[string]any{}
	}
	if cancel {
		caps["cancel"] = map[string]any{}
	}
	if toolsCall {
		caps["requests"] = map[string]any{"tools": map[string]any{"call": map[string]any{}}}
	}
	return caps
}

// present reports whether a capability member declares something: there,
// and neither null nor false.
func present(v []byte) bool {
	return v != nil && string(v) != "null" && string(v) != "false"
}

// beginTask reserves room for the task a task-augmented call may create.
func (p *Proxy) beginTask(inv invocation) (*tasks.Reservation, *jsonrpc.Error) {
	if inv.req != nil && inv.req.Sessionless() && declaresTasksExtension(inv.req) {
		// The tasks extension's, bridged to a 2025-11-25 upstream: the
		// conversation's.
		s, err := p.requestSession(inv.req, inv.key)
		if err != nil {
			return nil, errorObject(codeInternal, "tools/call %q: %v", inv.name, err)
		}
		res, err := p.tasks.Reserve(s.taskOwner(), inv.req.Holder)
		if err != nil {
			return nil, errorObject(codeInternal, "tools/call %q: %v", inv.name, err)
		}
		return res, nil
	}
	if inv.req == nil || inv.req.Sessionless() || !p.sessions.alive(inv.req.Session) {
		return nil, errorObject(jsonrpc.CodeInvalidRequest, "tools/call %q asks for a task (params.task), and tasks belong to the session that created them: initialize a session (protocol 2025-11-25) first", inv.name)
	}
	res, err := p.tasks.Reserve(p.session(inv.req.Session).taskOwner(), inv.req.Holder)
	if err != nil {
		return nil, errorObject(codeInternal, "tools/call %q: %v", inv.name, err)
	}
	return res, nil
}

// taskCreated records the task of a CreateTaskResult and returns the result
// with the aggregator's id in place of the upstream's. A result without a
// task (the upstream ran the call at once) is not a task: ok is false.
//
// Status notifications of the task that came before the result are
// delivered to the owner now, in order; the progress token of the call
// (tp, nil when it had none) stays valid until the task ends.
func (p *Proxy) taskCreated(res *tasks.Reservation, tp *taskProgress, server string, inst *upstream.Instance, lease session.Key, timeout timeLimit, raw json.RawMessage) (json.RawMessage, bool) {
	upID, ok := tasks.StringAt(raw, tasks.CreatedIDPath)
	if !ok {
		tp.drop()
		return raw, false
	}
	ttl, hasTTL := tasks.TTL(rawjson.Member(raw, "task"))
	s := p.clients.session(res.Owner.Key)
	e, err := p.tasks.AddHeld(res, &tasks.Entry{UpstreamID: upID, Server: server, Inst: inst, Lease: lease,
		Timeout: timeout.d, TimeoutSetting: timeout.setting, Keep: tasks.KeepFor(ttl, hasTTL)}, func(e *tasks.Entry, method string, params []byte) {
		p.heldNoteOut(s, e, method, params)
	})
	if err != nil {
		tp.drop()
		p.log.Error("a task could not be recorded; its result goes to the client as the upstream sent it", "server", server, "err", err)
		return raw, false
	}
	out, _ := tasks.MapStringAt(raw, tasks.CreatedIDPath, tasks.SetString(e.ID))
	out = p.relatedToClient(out, inst, e.Owner)
	p.tasks.Touch(e, tasks.Terminal(rawjson.Member(raw, "task")))
	tp.attach(e)
	if bridgedOwner(e) {
		// Requests about a task of the tasks extension (a conversation's,
		// on its leased instance too) are held for it. (A shared instance
		// was given its task owners' handler before the call went out.)
		inst.SetServerRequestHandler(p.taskOwnerRequests(inst))
	}
	p.log.Debug("task created", "server", server, "task", e.ID)
	if p.ownerGone(e.Owner) {
		// The session ended while the call ran: its tasks went before this
		// one was added. It goes the same way.
		p.tasksEnded(res.Owner)
	}
	return out, true
}

// taskNotFound is the answer for an id that is not the session's task:
// unknown, expired, or another session's, all alike.
func taskNotFound(method, id string) *jsonrpc.Message {
	return failure(jsonrpc.CodeInvalidParams, "%s: task %q not found: this session has no task with that id (it may have expired)", method, id)
}

// needSession answers a tasks request that came without a session.
func needSession(method string) *jsonrpc.Message {
	return failure(jsonrpc.CodeInvalidRequest, "%s needs a session: tasks (protocol 2025-11-25) belong to the session that created them", method)
}

// taskRequest serves tasks/get, tasks/result and tasks/cancel: the owner's
// id is mapped to the upstream's, the request goes to the instance that
// runs the task, and the answer comes back with the ids mapped back.
func (p *Proxy) taskRequest(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	method := req.Msg.Method
	if req.Sessionless() {
		return needSession(method)
	}
	id, ok := tasks.StringAt(req.Msg.Params, tasks.IDPath)
	if !ok {
		return failure(jsonrpc.CodeInvalidParams, "%s needs params.taskId (a string)", method)
	}
	e, ok := p.tasks.Lookup(sessionLeaseKey(req.Session), id)
	if !ok || !p.admits(req.Profile, e.Server) {
		// A task of a server a profile edit took out of the client's
		// profile is out of its reach, as one that never was.
		if from := downstream.Resumed(req.Session); from != "" && !ok {
			return failure(jsonrpc.CodeInvalidParams, "%s: task %q not found: this session moved here from replica %q, which no longer serves it, and the tasks started there were lost with it; make the call again", method, id, from)
		}
		return taskNotFound(method, id)
	}
	params, _ := tasks.MapStringAt(req.Msg.Params, tasks.IDPath, tasks.SetString(e.UpstreamID))
	// A requestor's related-task _meta is to be ignored here; it is mapped
	// all the same, so that no aggregator id reaches the upstream.
	params = p.relatedToUpstream(params, e.Owner, e.Inst)
	timeout := p.serverRequestLimit(e.Server)
	if protocol.Modern(e.Inst.Protocol()) {
		return p.sessionExtensionTaskRequest(ctx, req, e, timeout)
	}
	if method == "tasks/result" {
		// It waits for the task to end: the tool's own call timeout.
		timeout = timeLimit{d: e.Timeout, setting: e.TimeoutSetting}
	}
	raw, reply, ok := p.forwardTaskRequest(ctx, req, e, method, params, timeout, true)
	if !ok {
		return reply
	}
	// A result means the task ended; so does a terminal status.
	p.tasks.Touch(e, method == "tasks/result" || tasks.Terminal(raw))
	if method != "tasks/result" {
		raw, _ = tasks.MapStringAt(raw, tasks.IDPath, func(old string) (string, bool) { return e.ID, old == e.UpstreamID })
	}
	raw = p.relatedToClient(raw, e.Inst, e.Owner)
	return answer(raw)
}

// forwardTaskRequest is onTaskInstance for a client's request about task e: when
// the upstream gave no result, ok is false and reply is what the client is
// to get instead (nil: nothing, the request having gone). A tasks/get the
// upstream refuses as invalid means it no longer has the task, which is
// then forgotten here too.
func (p *Proxy) forwardTaskRequest(ctx context.Context, req *downstream.Request, e *tasks.Entry, method string, params json.RawMessage, timeout timeLimit, relay bool) (raw json.RawMessage, reply *jsonrpc.Message, ok bool) {
	raw, rpcErr, respond := p.onTaskInstance(ctx, req, e, method, params, timeout, relay)
	switch {
	case !respond:
		return nil, nil, false
	case rpcErr != nil:
		if method == "tasks/get" && rpcErr.Code == jsonrpc.CodeInvalidParams {
			p.tasks.Remove(e) // the upstream no longer has it
		}
		return nil, &jsonrpc.Message{Error: taskIDsToClient(rpcErr, e)}, false
	}
	return raw, nil, true
}

// serverRequestLimit is the request timeout of the running server named,
// none when it is not running.
func (p *Proxy) serverRequestLimit(server string) timeLimit {
	if rs := p.current().servers[server]; rs != nil {
		return requestLimit(rs.cfg)
	}
	return timeLimit{}
}

// onTaskInstance sends a request about task e to the instance that runs
// it, through the forwarder, bounded by timeout (which progress pushes
// back). With relay, the upstream's notifications and requests during it go
// to req's stream. respond is false when the client went away and no
// answer is due. A task whose instance stopped or was replaced is lost,
// and forgotten.
func (p *Proxy) onTaskInstance(ctx context.Context, req *downstream.Request, e *tasks.Entry, method string, params json.RawMessage,
	timeout timeLimit, relay bool) (raw json.RawMessage, rpcErr *jsonrpc.Error, respond bool) {
	inv := invocation{method: method, server: e.Server, params: params, key: e.Lease, onTask: e, limit: timeout}
	if method == "tasks/result" {
		inv.hint = "the task goes on: poll tasks/get, call tasks/result again, or raise " + timeout.setting
	}
	if relay {
		inv.req = req
		inv.token = requestMeta(req.Msg.Params)["progressToken"]
	}
	raw, rpcErr, err := p.send(ctx, &inv)
	return raw, rpcErr, err == nil
}

// taskInstance acquires, for the forwarder, the instance that runs the
// task inv is about, through the pool that owns it (rs; nil when the
// server is gone). A task whose instance stopped or was replaced is lost,
// and forgotten: rpcErr says so. gone is true when the caller went away.
func (p *Proxy) taskInstance(ctx, callCtx context.Context, rs *runningServer, inv *invocation) (grant *session.Grant, rpcErr *jsonrpc.Error, gone bool) {
	e := inv.onTask
	lost := func() (*session.Grant, *jsonrpc.Error, bool) {
		p.tasks.Remove(e)
		return nil, errorObject(jsonrpc.CodeInvalidParams, "%s: task %q is lost: the instance of server %q that ran it has stopped or was replaced (a restart, a reload, a release of the lease or its recycling), and its tasks with it",
			inv.method, e.ID, e.Server), false
	}
	if rs == nil || instanceDone(e.Inst) {
		return lost()
	}
	if !rs.pool.Stateless() {
		// Never lease a fresh instance just to learn the task is not there.
		if inst, ok := rs.pool.Leased(e.Lease); !ok || inst != e.Inst {
			return lost()
		}
	}
	grant, err := rs.pool.Acquire(callCtx, e.Lease)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, true
		}
		return nil, errorObject(codeInternal, "%s: %s", inv.subject(e.Server), p.scrub(rs.cfg, err.Error())), false
	}
	if grant.Instance != e.Inst {
		grant.Done()
		return lost()
	}
	return grant, nil, false
}

// taskIDsToClient is an upstream's error about task e with the upstream's
// id of the task, wherever its text or data names it, replaced by the
// client's: the client's id tells nothing of the upstream.
func taskIDsToClient(rpcErr *jsonrpc.Error, e *tasks.Entry) *jsonrpc.Error {
	if e.UpstreamID == "" {
		return rpcErr
	}
	out := *rpcErr
	out.Message = strings.ReplaceAll(out.Message, e.UpstreamID, e.ID)
	if len(out.Data) > 0 {
		out.Data = bytes.ReplaceAll(out.Data, []byte(e.UpstreamID), []byte(e.ID))
	}
	return &out
}

func instanceDone(inst *upstream.Instance) bool {
	select {
	case <-inst.Done():
		return true
	default:
		return false
	}
}

// tasksList serves tasks/list: the session's own tasks, oldest first, in
// pages of tasks.ListPage, each with its state as its instance tells it now
// (tasks/get). A task its upstream no longer has is left out, and forgotten.
func (p *Proxy) tasksList(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	if req.Sessionless() {
		return needSession("tasks/list")
	}
	var after uint64
	if c := cursorOf(req.Msg.Params); c != "" {
		var ok bool
		if after, ok = tasks.ParseCursor(c); !ok {
			return failure(jsonrpc.CodeInvalidParams, "tasks/list: invalid cursor %q: pass a nextCursor of an earlier tasks/list, unchanged", c)
		}
	}
	page, more := p.tasks.Page(p.sessions.find(req.Session).taskOwner(), after, tasks.ListPage)
	items := make([]json.RawMessage, len(page))
	var wg sync.WaitGroup
	slots := make(chan struct{}, taskListConcurrency)
	for i, e := range page {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if p.admits(req.Profile, e.Server) {
				items[i] = p.taskState(ctx, req, e)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	body := []byte(`{"tasks":[`)
	n := 0
	for _, item := range items {
		if item == nil {
			continue
		}
		if n > 0 {
			body = append(body, ',')
		}
		body = append(body, item...)
		n++
	}
	body = append(body, ']')
	if more {
		body = append(body, `,"nextCursor":`...)
		body = rawjson.AppendString(body, tasks.Cursor(page[len(page)-1].Seq()))
	}
	body = append(body, '}')
	return answer(body)
}

// taskState asks e's instance for the task's state, for tasks/list; nil
// when it cannot be had.
func (p *Proxy) taskState(ctx context.Context, req *downstream.Request, e *tasks.Entry) json.RawMessage {
	timeout := p.serverRequestLimit(e.Server)
	params := rawjson.AppendString([]byte(`{"taskId":`), e.UpstreamID)
	params = append(params, '}')
	modern := protocol.Modern(e.Inst.Protocol()) // a task of the tasks extension (extensionbridge.go)
	if modern {
		ctx = upstream.WithTasksExtension(ctx)
	}
	raw, rpcErr, ok := p.onTaskInstance(ctx, req, e, "tasks/get", params, timeout, false)
	switch {
	case !ok:
		return nil
	case rpcErr != nil:
		if rpcErr.Code == jsonrpc.CodeInvalidParams {
			p.tasks.Remove(e)
			return nil
		}
		p.log.Warn("tasks/list leaves out a task whose server did not tell its state", "server", e.Server, "task", e.ID, "err", rpcErr.Message)
		return nil
	}
	out, ok := tasks.MapStringAt(raw, tasks.IDPath, func(old string) (string, bool) { return e.ID, old == e.UpstreamID })
	if !ok {
		return nil // not a Task of this id: nothing to show
	}
	if modern {
		out = legacyTask(out)
	}
	p.tasks.Touch(e, tasks.Terminal(raw))
	return p.relatedToClient(out, e.Inst, e.Owner)
}

// taskStatus delivers an upstream's notifications/tasks/status to the
// session that owns the task, with the aggregator's id; a task the
// aggregator does not know of (not yet created, or forgotten) is told no one.
//
// A status that overtakes its task's CreateTaskResult (an upstream may
// announce the task before it answers the call) is held while a
// task-augmented call runs on the instance, and delivered once the result
// made the mapping (see taskCreated); bounded by maxHeldStatus per
// instance and by the life of those calls.
func (p *Proxy) taskStatus(inst *upstream.Instance, params json.RawMessage) {
	id, ok := tasks.StringAt(params, tasks.IDPath)
	if !ok {
		return
	}
	e, _ := p.tasks.NoteFor(inst, id, "notifications/tasks/status", params)
	if e == nil {
		return
	}
	if bridgedOwner(e) {
		// A task of the tasks extension: its listen streams hear of it.
		out, _ := tasks.MapStringAt(params, tasks.IDPath, tasks.SetString(e.ID))
		p.tasks.Touch(e, tasks.Terminal(params))
		p.bridgedTaskNote(e, p.relatedToClient(out, inst, e.Owner))
		return
	}
	s := p.clients.session(e.Owner)
	if s == nil {
		return
	}
	out, _ := tasks.MapStringAt(params, tasks.IDPath, tasks.SetString(e.ID))
	out = p.relatedToClient(out, inst, e.Owner)
	p.tasks.Touch(e, tasks.Terminal(params))
	if !p.admits(p.sessionClient(s), e.Server) {
		return
	}
	s.Notify(&jsonrpc.Message{Method: "notifications/tasks/status", Params: out})
}

// relatedToClient maps the related-task _meta of a message from inst to
// owner: the upstream's id becomes the aggregator's when it is one of
// owner's tasks, and is left out of reach (unchanged) otherwise.
func (p *Proxy) relatedToClient(msg []byte, inst *upstream.Instance, owner session.Key) []byte {
	out, _ := tasks.MapStringAt(msg, tasks.RelatedIDPath, func(old string) (string, bool) {
		e, ok := p.tasks.ByUpstream(inst, old)
		if !ok || e.Owner != owner {
			return "", false
		}
		return e.ID, true
	})
	return out
}

// relatedToUpstream maps the related-task _meta of a message from owner to
// inst: the aggregator's id becomes the upstream's.
func (p *Proxy) relatedToUpstream(msg []byte, owner session.Key, inst *upstream.Instance) []byte {
	out, _ := tasks.MapStringAt(msg, tasks.RelatedIDPath, func(old string) (string, bool) {
		e, ok := p.tasks.Lookup(owner, old)
		if !ok || e.Inst != inst {
			return "", false
		}
		return e.UpstreamID, true
	})
	return out
}

// relatedTasks wraps base, which answers inst's requests on behalf of
// session s (nil: sessionless, which owns no tasks), so that a request
// naming one of s's tasks in its related-task _meta reaches the client
// under the client's id, and the answer goes back under the upstream's; a
// request naming a task of another session is refused, never relayed.
func (p *Proxy) relatedTasks(base upstream.ServerRequestHandler, inst *upstream.Instance, s downstream.Session) upstream.ServerRequestHandler {
	if s == nil {
		return base
	}
	owner := sessionLeaseKey(s)
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return p.relate(ctx, base, inst, owner, method, params)
	}
}

// callRequests is relatedTasks(serverRequests(req), inst, req.Session) made
// as one function: a call makes it whether or not the upstream asks
// anything, so the inner handler and the session's lease key are only made
// when it does, and the function holds no more than it needs to make them.
// It is the one allocation a call makes for it: a method value would be a
// closure too (its receiver bound in), a call allocates no struct of its
// own to bind, and a pooled one cannot serve, for the upstream may still
// run the handler of a call that ended (its requests are answered on
// goroutines of their own), which must not reach the next call's request.
func (p *Proxy) callRequests(req *downstream.Request, inst *upstream.Instance) upstream.ServerRequestHandler {
	if req.Session == nil {
		if declaresTasksExtension(req) && !protocol.Modern(inst.Protocol()) {
			return p.bridgedRequests(p.serverRequests(req), inst)
		}
		return p.serverRequests(req)
	}
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return p.relate(ctx, p.serverRequests(req), inst, sessionLeaseKey(req.Session), method, params)
	}
}

// relate passes a request of inst to base, the ids of the tasks of the
// session owner it names mapped (see relatedTasks).
func (p *Proxy) relate(ctx context.Context, base upstream.ServerRequestHandler, inst *upstream.Instance, owner session.Key, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if !rawjson.Mentions(params, tasks.RelatedTaskKey) {
		return base(ctx, method, params)
	}
	if up, ok := tasks.StringAt(params, tasks.RelatedIDPath); ok {
		// Over HTTP the request may overtake the CreateTaskResult of the
		// task it names: wait for it (bounded), so as to map the id.
		e, known := p.awaitTask(ctx, inst, up)
		if known && e.Owner != owner {
			return nil, jsonrpc.Errorf(upstream.CodeUnattributed, "%s belongs to a task of another downstream session of the aggregator; it was not relayed", method)
		}
		params = p.relatedToClient(params, inst, owner)
	}
	result, rpcErr := base(ctx, method, params)
	if result != nil && rawjson.Mentions(result, tasks.RelatedTaskKey) {
		result = p.relatedToUpstream(result, owner, inst)
	}
	return result, rpcErr
}

// taskOwnerRequests answers a shared instance's requests that no call in
// flight claims: one that names a task of a session in its related-task
// _meta goes to that session, as its leased instance's would; any other
// cannot be attributed.
func (p *Proxy) taskOwnerRequests(inst *upstream.Instance) upstream.ServerRequestHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		var s downstream.Session
		if up, ok := tasks.StringAt(params, tasks.RelatedIDPath); ok {
			if e, known := p.awaitTask(ctx, inst, up); known {
				if bridgedOwner(e) {
					return p.bridgedInputRequest(ctx, e, method, params)
				}
				s = p.clients.session(e.Owner)
			}
		}
		if s == nil {
			return nil, jsonrpc.Errorf(upstream.CodeUnattributed,
				"server %q: %s cannot be attributed to one downstream session of the aggregator (no request in flight claims it, and it names no live task in _meta[%q]); it was not relayed",
				inst.Server(), method, tasks.RelatedTaskKey)
		}
		return p.relatedTasks(p.sessionRequests(s), inst, s)(ctx, method, params)
	}
}

// relatedOut maps the related-task _meta of a notification from inst on
// its way to session s (nil: none, and nothing is mapped); a message that
// names no task is returned as it is, at the cost of one scan.
func (p *Proxy) relatedOut(msg json.RawMessage, inst *upstream.Instance, s downstream.Session) json.RawMessage {
	if s == nil || !rawjson.Mentions(msg, tasks.RelatedTaskKey) {
		return msg
	}
	return p.relatedToClient(msg, inst, sessionLeaseKey(s))
}

// awaitTask finds inst's task id, waiting at most tasks.MappingWait for the
// CreateTaskResult of a task-augmented call running on inst.
func (p *Proxy) awaitTask(ctx context.Context, inst *upstream.Instance, id string) (*tasks.Entry, bool) {
	if e, ok := p.tasks.ByUpstream(inst, id); ok {
		return e, true
	}
	ctx, cancel := context.WithTimeout(ctx, tasks.MappingWait)
	defer cancel()
	return p.tasks.Await(ctx, inst, id)
}

// relatedNote tells where a notification (method, params) of inst that
// names a task in its related-task _meta goes: to the session that owns
// the task (s, which is nil when it ended), when the aggregator knows the
// task (related true); nowhere yet when the task's CreateTaskResult is
// still to come (held true: it was kept, to be delivered with it). A
// notification that names no task, or one unknown, is neither.
func (p *Proxy) relatedNote(inst *upstream.Instance, method string, params json.RawMessage) (s downstream.Session, related, held bool) {
	if !rawjson.Mentions(params, tasks.RelatedTaskKey) {
		return nil, false, false
	}
	up, ok := tasks.StringAt(params, tasks.RelatedIDPath)
	if !ok {
		return nil, false, false
	}
	e, held := p.tasks.NoteFor(inst, up, method, params)
	if held {
		return nil, true, true
	}
	if e == nil {
		return nil, false, false
	}
	return p.clients.session(e.Owner), true, false
}

// heldNoteOut delivers a notification held for task e to its owner s (nil:
// none), mapped. It runs under the task table's lock: it only queues.
func (p *Proxy) heldNoteOut(s downstream.Session, e *tasks.Entry, method string, params []byte) {
	out := params
	if method == "notifications/tasks/status" {
		out, _ = tasks.MapStringAt(out, tasks.IDPath, tasks.SetString(e.ID))
		e.EndedLocked(tasks.Terminal(params))
	}
	out, _ = tasks.MapStringAt(out, tasks.RelatedIDPath, func(old string) (string, bool) { return e.ID, old == e.UpstreamID })
	if s == nil {
		return
	}
	if method == "notifications/message" && !p.wantsLog(s, params) {
		return
	}
	s.Notify(&jsonrpc.Message{Method: method, Params: out})
}

// wantsLog reports whether session s takes a log message with params; none
// whose level is none of MCP's.
func (p *Proxy) wantsLog(s downstream.Session, params []byte) bool {
	level, ok := logLevels[logLevelOf(params)]
	return ok && p.takesLog(s, level)
}

// takesLog reports whether session s takes a log message of level: it was
// offered logging at its initialize (a server that did not declare logging
// must not send log messages), and level is at least the one it set with
// logging/setLevel, or the default.
func (p *Proxy) takesLog(s downstream.Session, level int) bool {
	sess := p.sessions.find(s)
	return sess.offered().logging && level >= sess.logLevel()
}

// logLevelOf is the level member of a log message's params.
func logLevelOf(params []byte) string {
	level, _ := tasks.StringAt(params, []string{"level"})
	return level
}

// session is the downstream session of the call, or nil.
func (inv invocation) session() downstream.Session {
	if inv.req == nil {
		return nil
	}
	return inv.req.Session
}

// sameSession reports whether a and b are the same live session.
func sameSession(a, b downstream.Session) bool {
	return a != nil && b != nil && a.Key() == b.Key()
}

// taskProgress carries the progress of a task-augmented tools/call: to the
// call's own stream while it runs, then, once the call answered with a
// CreateTaskResult, to the session that owns the task, until the task
// ends (its token stays valid that long) or is forgotten. Progress that
// names the task (related-task _meta) before its CreateTaskResult was
// read is held, and so is all that comes after it until then, in order, at
// most maxEarlyProgress, and delivered with it. A nil
// *taskProgress does nothing.
type taskProgress struct {
	p     *Proxy
	inst  *upstream.Instance
	relay func(params json.RawMessage) // to the call's stream
	mu    sync.Mutex
	entry *tasks.Entry // the task, once created
	// release ends the token's registration, from the CreateTaskResult
	// until attach or drop.
	release func()
	early   []json.RawMessage
}

// maxEarlyProgress bounds the progress held for a task not yet mapped.
const maxEarlyProgress = 16

func (p *Proxy) newTaskProgress(inst *upstream.Instance, relay func(json.RawMessage)) *taskProgress {
	return &taskProgress{p: p, inst: inst, relay: relay}
}

// onProgress is the call's upstream.Call.OnProgress.
func (tp *taskProgress) onProgress(params json.RawMessage) {
	tp.mu.Lock()
	e := tp.entry
	if e == nil {
		// Once one is held, every later one is held behind it: passed on
		// now, it would reach the client before the one held, progress
		// going backwards. Past the bound they are dropped, for the same
		// reason.
		if len(tp.early) > 0 || tp.namesUnknownTask(params) {
			if len(tp.early) < maxEarlyProgress {
				tp.early = append(tp.early, append(json.RawMessage(nil), params...))
			}
			tp.mu.Unlock()
			return
		}
		tp.mu.Unlock()
		tp.relay(params)
		return
	}
	tp.mu.Unlock()
	tp.toOwner(e, params)
}

// namesUnknownTask reports whether params name, in related-task _meta, a
// task of the instance that is not mapped yet.
func (tp *taskProgress) namesUnknownTask(params json.RawMessage) bool {
	if !rawjson.Mentions(params, tasks.RelatedTaskKey) {
		return false
	}
	up, ok := tasks.StringAt(params, tasks.RelatedIDPath)
	if !ok {
		return false
	}
	_, known := tp.p.tasks.ByUpstream(tp.inst, up)
	return !known
}

// toOwner delivers progress of task e to the session that owns it.
func (tp *taskProgress) toOwner(e *tasks.Entry, params json.RawMessage) {
	if !tp.p.tasks.Listening(e) {
		return
	}
	if s := tp.p.clients.session(e.Owner); s != nil {
		s.Notify(&jsonrpc.Message{Method: "notifications/progress", Params: tp.p.relatedOut(params, tp.inst, s)})
	}
}

// keep is the call's upstream.Call.KeepProgress: a CreateTaskResult keeps
// the token registered.
func (tp *taskProgress) keep(result json.RawMessage, release func()) bool {
	if _, ok := tasks.StringAt(result, tasks.CreatedIDPath); !ok {
		return false
	}
	tp.mu.Lock()
	tp.release = release
	tp.mu.Unlock()
	return true
}

// attach makes task e the progress's destination: what was held goes to
// its owner first, and the kept registration is e's to end.
func (tp *taskProgress) attach(e *tasks.Entry) {
	if tp == nil {
		return
	}
	tp.mu.Lock()
	release := tp.release
	tp.release = nil
	if release == nil {
		tp.mu.Unlock()
		tp.drop()
		return
	}
	for _, params := range tp.early {
		tp.toOwner(e, params)
	}
	tp.early = nil
	tp.entry = e
	tp.mu.Unlock()
	tp.p.tasks.KeepProgress(e, release)
}

// drop ends a kept registration that no task took; what was held goes to
// the call's stream, as the call's own progress.
func (tp *taskProgress) drop() {
	if tp == nil {
		return
	}
	tp.mu.Lock()
	release, early := tp.release, tp.early
	tp.release, tp.early = nil, nil
	tp.mu.Unlock()
	if release != nil {
		release()
	}
	for _, params := range early {
		tp.relay(params)
	}
}

// tasksEnded forgets the tasks of a session that ended. Nobody can ask for
// them again, so those on shared instances, which outlive the session, are
// cancelled there (best effort, off the caller's path); a leased instance
// ends with its session and its tasks with it.
func (p *Proxy) tasksEnded(owner *tasks.Owner) {
	if owner == nil {
		return
	}
	gone := p.tasks.DropSession(owner)
	var cancels []*tasks.Entry
	st := p.current()
	for _, e := range gone {
		rs := st.servers[e.Server]
		if rs == nil || !rs.pool.Stateless() || instanceDone(e.Inst) || p.tasks.HasEnded(e) {
			continue
		}
		if !present(rawjson.Member(rawjson.Member(rs.caps.Raw, "tasks"), "cancel")) && !present(rawjson.Member(rs.caps.Extensions, TasksExtension)) {
			continue
		}
		cancels = append(cancels, e)
	}
	p.cancelUpstreamTasks(cancels, "task of an ended session cancelled")
}

// cancelUpstreamTasks sends tasks/cancel for each task to its instance,
// under the upstream's id (declaring the tasks extension, for a server of
// 2026-07-28): best effort, off the caller's path, each bounded; each is
// logged (debug) with why.
func (p *Proxy) cancelUpstreamTasks(cancels []*tasks.Entry, why string) {
	if len(cancels) == 0 {
		return
	}
	go func() {
		for _, e := range cancels {
			ctx, cancel := context.WithTimeout(upstream.WithTasksExtension(p.life), taskCancelOnCloseTimeout)
			params := rawjson.AppendString([]byte(`{"taskId":`), e.UpstreamID)
			_, err := e.Inst.Do(ctx, upstream.Request{Method: "tasks/cancel", Params: append(params, '}')})
			cancel()
			p.log.Debug(why, "server", e.Server, "task", e.ID, "err", err)
		}
	}()
}

// session returns the registered session with key, or nil (a
// conversation's key: it has no downstream session).
func (c *clients) session(key session.Key) downstream.Session {
	if s := c.reg.lookup(key); s != nil {
		return s.ds
	}
	return nil
}
