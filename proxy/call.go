package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/telemetry"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// JSON-RPC error codes the aggregator itself answers with.
const (
	codeInvalidParams = jsonrpc.CodeInvalidParams
	codeInternal      = jsonrpc.CodeInternalError
)

// ErrTimeout marks a call that ran past its timeout.
var ErrTimeout = errors.New("timed out")

// invocation is one request the forwarder sends to a server, whichever
// transport it arrived on: a tools/call, which goes to the server that
// exports the tool, or another method, which goes to the server the
// caller's route chose.
type invocation struct {
	method string // tools/call, or the method sent as it is
	// name is the exported name of the tool a tools/call calls, and entry
	// the entry catalog entryIn exports under it (nil: none), when the
	// caller looked it up there already: a lookup under another catalog
	// (nil: none was made) is made again.
	name    string
	entry   *catalog.Entry
	entryIn *catalog.Catalog
	// server is the server a request other than tools/call goes to, and
	// params its params as they go upstream, byte for byte; a tools/call's
	// are the client's, which upstream.Call edits for the upstream.
	server    string
	params    json.RawMessage
	key       session.Key
	anonymous bool            // key is the shared anonymous one
	args      json.RawMessage // forwarded byte for byte
	task      json.RawMessage // params.task, forwarded byte for byte; nil: not a task
	// token is the caller's progress token; nil if none. The progress of a
	// request with one goes on req's stream (req.Send, which only queues:
	// it runs on the upstream's reader goroutine).
	token json.RawMessage
	// req is the downstream request, for what the upstream sends back
	// during the call (its requests, its log messages); nil for a request
	// the aggregator makes of its own accord.
	req *downstream.Request
	// onTask pins a request about a task (tasks/get, tasks/result,
	// tasks/cancel) to the instance that runs the task: it goes there or
	// nowhere, with limit for its time limit and hint for what an error
	// about running past it advises ("": raise the setting).
	onTask *tasks.Entry
	limit  timeLimit
	hint   string
	// ask answers the upstream's requests during a request the aggregator
	// makes of its own accord (req nil); nil: none is answered.
	ask upstream.ServerRequestHandler
}

// toolCall reports whether inv is a tools/call.
func (inv *invocation) toolCall() bool { return inv.method == "tools/call" }

// subject names what a request went to in an error about it:
// `server "s": tool "t"` for a tools/call, `method: server "s"` otherwise.
func (inv *invocation) subject(server string) string {
	if inv.toolCall() {
		return fmt.Sprintf("server %q: tool %q", server, inv.name)
	}
	return fmt.Sprintf("%s: server %q", inv.method, server)
}

// label is subject without the server, for errors that name it themselves.
func (inv *invocation) label() string {
	if inv.toolCall() {
		return fmt.Sprintf("tool %q", inv.name)
	}
	return inv.method
}

// target is what the forwarder sends a request to: an upstream instance
// (*upstream.Instance), or the aggregator's own server, which serves its
// own tools in process (ownServer). Do returns the raw result, or the
// target's JSON-RPC error as *upstream.RPCError.
type target interface {
	Do(ctx context.Context, r upstream.Request) (json.RawMessage, error)
}

var _ target = (*upstream.Instance)(nil)

// send is the forwarder: every request that goes to a server, tools/call
// included, goes through it. It resolves the target (the server that
// exports the tool, or the one the caller's route chose, the aggregator's
// own tools on its in-process server), acquires an instance of it (the
// session's lease, or the shared one; a reload that retires the server in
// between sends the request to its new instance), applies the call limits
// and the deadline, forwards the params raw and maps the one set of
// errors. It returns the raw result, or a raw JSON-RPC error object; err
// is set only when the caller went away and no response is due. inv is
// the request's own, which send changes as it goes (the tool an
// mcp_call_tool call names, the params as they go up): a pointer, so that
// a request does not copy its few hundred bytes.
func (p *Proxy) send(ctx context.Context, inv *invocation) (result json.RawMessage, rpcErr *jsonrpc.Error, err error) {
	call := inv.toolCall()
	var (
		st       *state
		server   string
		entry    *catalog.Entry // a tools/call's
		counted  *catalog.Entry // what the call counts as, when not entry
		rs       *runningServer
		to       target
		grant    *session.Grant // nil for the aggregator's own server
		deadline *deadline
		callCtx  context.Context
		limit    timeLimit
	)
	var decided verdict // the policy's and rate limits', for the audit log
	// bound is the Session of the request's downstream session, for a call
	// of a stateful server: looked up once, for the lease's owner, its
	// binding and whether the session ended meanwhile.
	var bound *Session
	// start is when a tools/call came, on the monotonic clock (monoNow): one
	// clock read, which its deadline shares when nothing could wait between
	// them (armedAt). A clock read is not cheap on every machine.
	var start time.Duration
	isError := unread // of the result returned, when send read it
	if call {
		start = monoNow()
	}
	// One deferred call ends every call, whatever it came to hold: a
	// deferred call each costs more than the tests in this one.
	var held holdings
	defer func() {
		held.release(p)
		if inv.req != nil && !inv.req.Sessionless() && (rs == nil || !rs.pool.Stateless()) && !p.sessions.aliveAs(bound, inv.req.Session) {
			// The session ended while the request ran: a lease it took
			// after the session's leases were ended must not outlive it.
			// (A sessionless request's lease is its _meta conversation's,
			// not the session's.) A stateless server's call takes none.
			p.sessionEnded(inv.key)
		}
		if !call {
			return
		}
		if counted == nil {
			counted = entry
		}
		if p.opts.Observer == nil && p.audit.Load() == nil {
			return
		}
		elapsed := monoNow() - start
		p.observeCall(counted, elapsed, callCtx, result, rpcErr, err, isError)
		if l := p.audit.Load(); l != nil {
			p.auditCall(l, entry, inv.name, *inv, decided, time.Now(), elapsed, result, rpcErr, err)
		}
	}()
	awaited, admitted := false, false
	loginOffers := 0 // to a 2026-07-28 client (askLogin)
	passes := 0
	for retries := 0; ; {
		passes++
		st = p.current()
		server = inv.server
		if call {
			var again bool
			entry, counted, rpcErr, again = p.resolveTool(ctx, st, inv, &awaited, &loginOffers)
			if rpcErr != nil {
				return nil, rpcErr, nil
			}
			if again {
				continue
			}
			if mismatch := paramHeaderMismatch(inv.req, entry); mismatch != nil {
				return nil, mismatch, nil
			}
			server = entry.Server
		}
		if server == adminServer {
			// Its tools answer at once, and hold nothing of an upstream's.
			to, callCtx, deadline = &ownServer{p: p, st: st, key: inv.key, client: requestClient(inv.req)}, ctx, noDeadline()
			break
		}
		rs = st.servers[server]
		if inv.onTask != nil {
			limit = inv.limit
			callCtx, deadline = newDeadline(ctx, limit.d)
			var gone bool
			if grant, rpcErr, gone = p.taskInstance(ctx, callCtx, rs, inv); grant != nil {
				to = grant.Instance
				break
			}
			deadline.stop()
			if gone {
				return nil, nil, ctx.Err()
			}
			return nil, rpcErr, nil
		}
		if rs == nil {
			return nil, errorObject(codeInternal, "%s: the server is not running", inv.subject(server)), nil
		}
		if call && !admitted { // a retry is the same call: decided once
			admitted = true
			if rpcErr, decided = p.admitCall(ctx, st, entry, inv); rpcErr != nil {
				return nil, rpcErr, nil
			}
			if decided.denied != nil {
				return decided.denied, nil, nil
			}
		}
		if inv.anonymous && !rs.pool.Stateless() && p.anonWarned.CompareAndSwap(false, true) {
			p.log.Warn("a sessionless client called a stateful server without a lease key; all such calls share one anonymous lease",
				"server", server, "fix", "set _meta[\""+LeaseMetaKey+"\"] to a conversation id")
		}
		if call {
			limit = toolLimit(rs.cfg, entry)
			callCtx, deadline = callDeadline(ctx, inv.req, limit.d, armedAt(start, passes, st))
		} else {
			// Not necessarily its request's whole work (a listen stream
			// subscribes on its own request): a context of its own.
			limit = requestLimit(rs.cfg)
			callCtx, deadline = newDeadline(ctx, limit.d)
		}
		var aerr error
		claim := session.Claim{Holder: holderOf(inv.req)}
		bound = nil
		if !rs.pool.Stateless() && inv.req != nil {
			// A leased instance serves this host alone: it declares the
			// host's own extension settings (upstream.ForHost).
			claim.Host, claim.ForHost = capabilitiesOf(inv.req), true
			var holds *Session
			if inv.req.Sessionless() || inv.req.Session == nil {
				// The lease is its conversation's, which needs room for a Session.
				conv, cerr := p.sessions.conversation(inv.key)
				if cerr != nil {
					deadline.stop()
					return nil, errorObject(codeInternal, "%s: %v", inv.subject(server), cerr), nil
				}
				holds = conv
			} else {
				bound = p.session(inv.req.Session)
				holds = bound
			}
			// The lease keeps who holds it, for a profile edit to judge
			// (revokeLeases).
			claim.Owner = holds.leaseOwner(inv.req)
		}
		grant, aerr = rs.pool.AcquireFor(callCtx, inv.key, claim)
		if aerr == nil {
			to = grant.Instance
			break
		}
		deadline.stop()
		if errors.Is(aerr, session.ErrClosed) && retries < 3 {
			retries++
			continue
		}
		if again, offer, handled := p.askLogin(ctx, inv.req, server, aerr, &loginOffers); handled {
			if again {
				continue
			}
			return nil, offer, nil
		}
		if offer := p.loginOffer(ctx, inv.req, server, aerr); offer != nil {
			return nil, offer, nil
		}
		return nil, errorObject(codeInternal, "%s: %s", inv.subject(server), p.scrub(rs.cfg, aerr.Error())), nil
	}
	held.deadline, held.grant = deadline, grant

	if call && grant != nil && st.limits.bounds(entry.Settings.MaxInstances) {
		tool := ""
		if entry.Settings.MaxInstances > 0 {
			tool = entry.Server + "/" + entry.Original
		}
		hold, lerr := st.limits.acquire(callCtx, holderOf(inv.req), tool, entry.Settings.MaxInstances)
		if lerr != nil {
			var full *limitError
			if errors.As(lerr, &full) && errors.Is(lerr, ErrTimeout) {
				return nil, errorObject(codeInternal, "%s: %s calls were in flight for the whole %s set by %s; raise that limit, or %s to let a call wait longer",
					inv.subject(server), full.limit, limit.d, limit.setting, limit.setting), nil
			}
			return nil, errorObject(codeInternal, "%s: %v", inv.subject(server), lerr), nil
		}
		held.limits, held.limited = hold, true
	}

	bridgedTask := call && grant != nil && len(inv.task) == 0 && p.bridgesTask(inv.req, rs, grant.Instance, entry)
	if bridgedTask {
		inv.task = json.RawMessage(`{}`) // the extension's task, as a 2025-11-25 task upstream
		if params, ok := rawjson.Set(inv.params, "task", func([]byte) []byte { return inv.task }); ok {
			inv.params = params // the params go up as the client sent them, edited where they stand
		}
	}
	// A session's task on a server that speaks the tasks extension: the
	// call goes up declaring the extension, without params.task.
	extTask := call && grant != nil && len(inv.task) > 0 && !bridgedTask && inv.req != nil && !inv.req.Sessionless() &&
		protocol.Modern(grant.Instance.Protocol()) && offersTasksExtension(rs)
	if extTask {
		inv.params = rawjson.Without(inv.params, "task")
	}
	slot, cached, hit := p.cachedResult(inv, rs, grant)
	if hit {
		return cached, nil, nil
	}
	up := upstream.Request{Method: inv.method, Params: inv.params}
	if call {
		var cerr error
		if up, cerr = (upstream.Call{Name: entry.Original, Params: inv.params, Arguments: inv.args, Withhold: withheldMeta}).Request(); cerr != nil {
			return nil, errorObject(codeInternal, "%s: %v", inv.subject(server), cerr), nil
		}
	}
	var (
		task *tasks.Reservation
		tp   *taskProgress
	)
	if len(inv.task) > 0 && grant != nil {
		if task, rpcErr = p.beginTask(*inv); rpcErr != nil {
			return nil, rpcErr, nil
		}
		held.task = task
		held.expected = p.tasks.Expect(grant.Instance)
		if rs != nil && (rs.pool.Stateless() || bridgedTask) {
			// A shared instance's requests outside any call reach the
			// session whose task they name (those about a bridged task of
			// the tasks extension are held for its conversation). Set before the call goes out:
			// the upstream may ask as soon as it has answered, and its
			// request can be read before this call has recorded the task
			// (it then waits for the mapping, see awaitTask).
			grant.Instance.SetServerRequestHandler(p.taskOwnerRequests(grant.Instance))
		}
	}
	if inv.req != nil {
		up.Principal = principalOf(inv.req)
		if grant != nil {
			up.OnServerRequest = p.callRequests(inv.req, grant.Instance)
			if inv.onTask == nil {
				p.bindSession(rs, grant, inv.req, inv.key, bound)
			}
			p.inflight.add(grant.Instance, inv.req)
			held.running, held.req = grant.Instance, inv.req
		}
	} else if inv.ask != nil && grant != nil {
		up.OnServerRequest = inv.ask
	}
	if inv.req != nil && len(inv.token) > 0 && grant != nil {
		up.ProgressToken = inv.token
		// Locals, so that inv itself stays on the stack.
		send, session, inst, use := inv.req.Send, inv.session(), grant.Instance, deadline.uses()
		up.OnProgress = func(params json.RawMessage) {
			deadline.pushBack(use) // progress proves the call is alive
			send(&jsonrpc.Message{Method: "notifications/progress", Params: p.relatedOut(params, inst, session)})
		}
		if task != nil {
			// A task's progress token outlives the call: a copy of its
			// own, since the request's bytes may share the buffer the
			// transport read them into, which the token would keep.
			tp = p.newTaskProgress(inst, up.OnProgress)
			up.OnProgress, up.KeepProgress = tp.onProgress, tp.keep
			up.ProgressToken = append(json.RawMessage(nil), inv.token...)
		}
	}
	upCtx := callCtx
	if grant != nil {
		tool := ""
		if call {
			tool = entry.Original
		}
		var span *telemetry.Span
		upCtx, span = p.upstreamSpan(callCtx, inv.method, tool, rs, grant)
		if span != nil {
			if call && inv.name != entry.Original {
				span.SetExportedName(inv.name)
			}
			// The upstream's spans nest under this request's, in the
			// client's trace.
			up.Meta = span.Meta(nil)
			defer func() { span.End(result, rpcErr, err) }()
		}
	}
	up.OnServerRequest = slot.watch(up.OnServerRequest)
	if call && grant != nil {
		upCtx = p.callerFor(upCtx, inv.req, rs, grant.Instance)
	}
	if call && grant != nil && (declaresTasksExtension(inv.req) || extTask) {
		upCtx = upstream.WithTasksExtension(upCtx) // the upstream may answer with a task
	}
	raw, derr := to.Do(upCtx, up)
	for derr != nil && ctx.Err() == nil {
		// A 2026-07-28 client is offered the login the call needs, and the
		// call is tried again once it accepted; the wait for the person is
		// not the server's: the call's timeout starts again after it.
		deadline.pause()
		again, offer, handled := p.askLogin(ctx, inv.req, server, derr, &loginOffers)
		if !handled {
			deadline.reset()
			break
		}
		if !again {
			return nil, offer, nil
		}
		deadline.reset()
		raw, derr = to.Do(upCtx, up)
	}
	if derr != nil {
		var upstreamErr *upstream.RPCError
		switch {
		case errors.As(derr, &upstreamErr):
			return nil, &jsonrpc.Error{Code: upstreamErr.Code, Message: upstreamErr.Message, Data: upstreamErr.Data}, nil
		case errors.Is(derr, ErrTimeout) || (ctx.Err() == nil && errors.Is(derr, context.DeadlineExceeded)):
			hint := inv.hint
			if hint == "" {
				hint = "raise " + limit.setting + " if it needs longer"
			}
			return nil, errorObject(codeInternal, "%s: no result within %s set by %s (cancelled upstream); %s",
				inv.subject(server), limit.d, limit.setting, hint), nil
		case ctx.Err() != nil:
			return nil, nil, ctx.Err() // the client cancelled; no response is due
		default:
			if offer := p.loginOffer(ctx, inv.req, server, derr); offer != nil {
				return nil, offer, nil
			}
			var cfg *config.Server
			if rs != nil {
				cfg = rs.cfg
				if why := p.cutByReload(server, rs, derr); why != "" {
					return nil, errorObject(codeInternal, "%s: %s", inv.label(), why), nil
				}
			}
			return nil, errorObject(codeInternal, "%s: %s", inv.subject(server), p.scrub(cfg, derr.Error())), nil
		}
	}
	taskHandle, rawIsError := false, unread
	if call && grant != nil {
		taskHandle, rawIsError = resultHead(raw)
		if rawIsError == unread {
			taskHandle = isTaskHandle(raw)
		}
	}
	if call && grant != nil && task == nil && taskHandle {
		handle, rpcErr := p.taskHandle(*inv, entry.Server, grant.Instance, raw)
		return handle, rpcErr, nil // a task handle has no content to add notes to, and is never cached
	}
	if extTask && task != nil && taskHandle {
		tp.drop()
		created, rpcErr := p.extensionTaskCreated(task, entry.Server, grant.Instance, inv.key, limit, raw)
		return created, rpcErr, nil
	}
	if task != nil {
		if created, ok := p.taskCreated(task, tp, entry.Server, grant.Instance, inv.key, limit, raw); ok {
			if bridgedTask {
				return extensionHandle(created), nil, nil
			}
			return created, nil, nil // a CreateTaskResult has no content to add notes to
		}
	}
	if call && grant != nil {
		raw = leaseNotes(raw, rs, grant, inv.req) // text added to content: isError stays
		isError = rawIsError
	}
	p.keepResult(slot, raw)
	return raw, nil, nil
}

// holdings are what a call came to hold on its way upstream, each given
// back when send returns, the last taken first.
type holdings struct {
	deadline *deadline      // the call's, once its instance is acquired
	grant    *session.Grant // nil: none (the aggregator's own server)
	limits   limitHold
	limited  bool               // limits holds the call's slots
	task     *tasks.Reservation // the task it runs as; nil: none
	expected func()             // ends the instance's wait for the task's mapping
	running  *upstream.Instance // the instance req runs on (inflight); nil: none
	req      *downstream.Request
}

// release gives back what h holds.
func (h *holdings) release(p *Proxy) {
	if h.running != nil {
		p.inflight.remove(h.running, h.req)
	}
	if h.expected != nil {
		h.expected()
	}
	if h.task != nil {
		p.tasks.Release(h.task)
	}
	if h.limited {
		h.limits.release()
	}
	if h.grant != nil {
		h.grant.Done()
	}
	if h.deadline != nil {
		h.deadline.stop()
	}
}

// resolveTool finds the entry a tools/call runs as under st, or the error
// that answers it. An mcp_call_tool call that names a tool the caller may
// run becomes that tool's call (inv is changed): again asks to resolve it,
// under the current state. It is then limited, traced and counted as that
// tool's call, once; one that names no tool it can run goes to the
// aggregator's own server, which answers why (counted, when it names a
// tool the caller's profile hides, as that tool's call, as a direct call
// of it would be). awaited is whether the first load was waited for on
// mcp_call_tool's behalf. A tool no server exports while servers wait for
// a login is the offer of their logins: to a 2026-07-28 client an
// input_required round whose accepting retry waits for the servers to
// start (askToolLogin; again asks to resolve the tool anew, offers counts
// the offers), to an older one the -32042 error.
func (p *Proxy) resolveTool(ctx context.Context, st *state, inv *invocation, awaited *bool, offers *int) (entry, counted *catalog.Entry, rpcErr *jsonrpc.Error, again bool) {
	client := requestClient(inv.req)
	entry, ok := inv.entry, inv.entry != nil
	if inv.entryIn != st.catalog {
		entry, ok = st.catalog.Lookup(inv.name)
	}
	if ok && !st.profileOf(client).tool(entry) {
		// Answered as a name no server exports (hidden.go). entry stays
		// set: the metrics, which only the operator sees, count the call
		// under the tool's own name.
		p.hiddenName(inv.req, hiddenTool, inv.name, entry.Server)
		ok = false
	}
	if !ok {
		if again, offer, handled := p.askToolLogin(ctx, inv.req, st, inv.name, offers); handled {
			if again {
				return nil, nil, nil, true
			}
			return nil, entry, offer, false
		}
		if offer := p.unknownToolLoginOffer(ctx, inv.req, st, inv.name); offer != nil {
			return nil, entry, offer, false
		}
		return nil, entry, errorObject(codeInvalidParams, "unknown tool %q: no server exports it (it may be filtered out, renamed, or its server is down); call tools/list for the current names%s",
			inv.name, st.awaitingLogin(client)), false
	}
	if entry.Server != adminServer || entry.Original != callToolName || st.search == nil {
		return entry, nil, nil, false
	}
	name, args, why := callToolArgs(inv.args)
	if why != nil {
		return entry, nil, nil, false
	}
	named, ok := st.catalog.Lookup(name)
	switch {
	case !ok && !*awaited:
		*awaited = true
		p.awaitLoad(ctx) // a call made right after connecting finds its tool
		return nil, nil, nil, true
	case !ok:
		return entry, nil, nil, false
	case !st.profileOf(client).tool(named):
		p.hiddenName(inv.req, hiddenTool, name, named.Server)
		return entry, named, nil, false
	}
	inv.name, inv.args, inv.entry, inv.entryIn = name, args, named, st.catalog
	return nil, nil, nil, true
}

// leaseNotes adds to a tools/call result of req what the caller should
// know of the instance the call ran on: that a former one's state was
// lost, that a sealed session was taken up from another replica (its
// leases stayed there), and how to release a lease it now holds. A shared
// instance's grant has none of it to tell.
func leaseNotes(raw json.RawMessage, rs *runningServer, grant *session.Grant, req *downstream.Request) json.RawMessage {
	if !grant.Lost && !grant.Recycled && !grant.Reclaimed && !grant.First {
		return raw
	}
	server := rs.cfg.ID
	var notes []string
	if grant.Lost {
		notes = append(notes, fmt.Sprintf("Note: the previous dedicated instance of MCP server %q stopped unexpectedly and its state was lost; this call ran on a fresh instance.", server))
	}
	if grant.Recycled {
		notes = append(notes, fmt.Sprintf("Note: the dedicated instance of MCP server %q was replaced by a fresh one (lease.max_calls or lease.max_age) and its state was reset; this call ran on the fresh instance.", server))
	}
	if grant.Reclaimed {
		notes = append(notes, fmt.Sprintf("Note: the dedicated instance of MCP server %q this session held was reclaimed for another session while this session went unused (all of the server's lease.max_instances were taken), and its state was lost; this call ran on a fresh instance.", server))
	}
	if movedFrom := resumedFrom(req); grant.First && !rs.pool.Stateless() && movedFrom != "" {
		notes = append(notes, fmt.Sprintf("Note: this session moved here from replica %q, which no longer serves it; a dedicated instance of MCP server %q it held there was lost with its state; this call ran on a fresh instance.", movedFrom, server))
	}
	if grant.First && !rs.pool.Stateless() {
		grant.Announced() // with the reminder below, or with none when it is off
	}
	if grant.First && rs.cfg.LeaseReminder && !rs.pool.Stateless() {
		notes = append(notes, fmt.Sprintf("You now hold a dedicated instance of MCP server %q for this session. When you no longer need its tools, call mcp_release with {\"serverId\": %q} to free it.", server, server))
	}
	if len(notes) > 0 {
		raw = appendText(raw, notes)
	}
	return raw
}

// awaitingLogin names the servers of client's profile that could not
// start for want of a login, whose tools are missing until then: a tool
// the caller expects may be one of theirs. "" when there are none.
func (st *state) awaitingLogin(client string) string {
	var b strings.Builder
	for _, id := range st.awaitingLoginIDs(client) {
		fmt.Fprintf(&b, "; server %q waits for a login (mcp-aggregator login %s, on the gateway's machine) and its tools are missing until then", id, id)
	}
	return b.String()
}

// awaitingLoginIDs are the ids, sorted, of the servers of client's profile
// that could not start for want of a login.
func (st *state) awaitingLoginIDs(client string) []string {
	pr := st.profileOf(client)
	var ids []string
	for id, f := range st.failed {
		if pr.server(id) && waitsForLogin(f.why) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// appendText adds text items at the end of a result's content: spliced
// into the upstream's bytes, which otherwise stay as they are (their
// members' order, numbers and escapes included). A result that is no JSON
// object is returned as it is.
func appendText(result json.RawMessage, texts []string) json.RawMessage {
	items := make([][]byte, 0, len(texts))
	for _, t := range texts {
		item := append([]byte(`{"type":"text","text":`), rawjson.AppendString(nil, t)...)
		items = append(items, append(item, '}'))
	}
	out, err := rawjson.AppendToArray(result, "content", items...)
	if err != nil {
		return result
	}
	return out
}

// armedAt is when the deadline of a tools/call that came at start starts
// (callDeadline): start itself when nothing could wait between the two,
// on the first pass of send's loop without a policy (which may ask the
// user); else 0, for now.
func armedAt(start time.Duration, passes int, st *state) time.Duration {
	if passes == 1 && st.policy == nil {
		return start
	}
	return 0
}

// deadline is a timeout that progress notifications push back.
//
// A call's deadline (callDeadline) is pooled with its timer, so that a call
// allocates neither: it goes back to the pool when the call stops it, and
// its fields are then guarded by mu, its timer set under mu too. The timer
// is not stopped with a use, nor set again for the next one when it is
// already set to fire no later than that use's time: when it fires early
// (for an earlier use, or before a push back), it is set again for what is
// left. So most calls touch no timer at all, only a lock, and a timer fires
// at most once per timeout for nothing. A progress notification of an
// earlier use (a late one, or a task's, whose progress outlives its call)
// may still push the deadline back: a push back counts only for the use it
// was made for (uses, pushBack), and a timeout cancels only the request of
// the current use, once its time has come.
type deadline struct {
	timeout time.Duration
	timer   *time.Timer
	cancel  context.CancelCauseFunc // newDeadline's

	pooled bool // callDeadline's: the fields below are under mu
	mu     sync.Mutex
	req    *downstream.Request // the request a timeout cancels; nil once stopped
	when   time.Duration       // when it times out (monoNow); 0 while paused
	use    uint64              // counts its uses, each a call's
	set    bool                // the timer is set to fire, at fires
	fires  time.Duration
}

// monoBase is what monoNow counts from.
var monoBase = time.Now()

// monoNow is the time on the monotonic clock since monoBase, for pooled
// deadlines: one clock read, where time.Now makes two (the wall clock's
// too), each of them costly on some virtual machines.
func monoNow() time.Duration { return time.Since(monoBase) }

// untimed is the deadline of a request without a time limit: every method
// does nothing.
var untimed = &deadline{}

// callDeadlines are the stopped deadlines of calls, for the next ones.
var callDeadlines = sync.Pool{New: func() any { return &deadline{pooled: true} }}

// callDeadline is newDeadline for a call that is its request's whole work:
// a timeout ends the request's own context (with ErrTimeout as the cause),
// and the call needs no context of its own. The caller's ctx must come from
// req's. stop then only stops the timer, and hands the deadline back to
// the pool: the request's context is the transport's to end. at is when
// the call came (monoNow), a moment ago at most (0: now); the timer is set
// for timeout from now, so that the timeout never fires before it did when
// each call read the clock for it.
func callDeadline(ctx context.Context, req *downstream.Request, timeout, at time.Duration) (context.Context, *deadline) {
	if req == nil || req.Cancel == nil {
		return newDeadline(ctx, timeout)
	}
	if timeout <= 0 {
		return ctx, untimed
	}
	if at == 0 {
		at = monoNow()
	}
	d := callDeadlines.Get().(*deadline)
	d.arm(req, timeout, at)
	return ctx, d
}

// arm starts a pooled deadline's next use at at (monoNow): req is
// cancelled unless it is stopped (or pushed back) within timeout.
func (d *deadline) arm(req *downstream.Request, timeout, at time.Duration) {
	d.mu.Lock()
	d.timeout, d.req, d.use = timeout, req, d.use+1
	d.when = at + timeout
	if d.timer == nil {
		d.timer = time.AfterFunc(timeout, d.expire)
		d.set, d.fires = true, d.when
	} else {
		d.setLocked(timeout)
	}
	d.mu.Unlock()
}

// setLocked makes sure a pooled deadline's timer fires by when, timeout
// from now: it is set again only when it is not set, or set for later.
// Callers hold mu.
func (d *deadline) setLocked(timeout time.Duration) {
	if d.set && d.when >= d.fires {
		return
	}
	d.timer.Reset(timeout)
	d.set, d.fires = true, d.when
}

// expire is a pooled deadline's timer function: it cancels the request
// of the current use once its time has come, and waits on for a use that
// was pushed back (or began) after the timer was set.
func (d *deadline) expire() {
	d.mu.Lock()
	d.set = false
	req := d.req
	if req == nil || d.when == 0 {
		d.mu.Unlock()
		return // stopped, or paused
	}
	if left := d.when - monoNow(); left > 0 {
		d.setLocked(left)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	req.Cancel(ErrTimeout)
}

// noDeadline is the deadline of a request without a time limit.
func noDeadline() *deadline { return untimed }

func newDeadline(parent context.Context, timeout time.Duration) (context.Context, *deadline) {
	ctx, cancel := context.WithCancelCause(parent)
	d := &deadline{timeout: timeout, cancel: cancel}
	if timeout > 0 {
		d.timer = time.AfterFunc(timeout, func() { cancel(ErrTimeout) })
	}
	return ctx, d
}

// reset restarts the timeout, on the call's own goroutine.
func (d *deadline) reset() {
	if d.pooled {
		d.mu.Lock()
		d.restartLocked()
		d.mu.Unlock()
		return
	}
	if d.timer != nil {
		d.timer.Reset(d.timeout)
	}
}

// uses is what pushBack takes: the current use.
func (d *deadline) uses() uint64 {
	if !d.pooled {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.use
}

// pushBack restarts the timeout for a progress notification of use
// (uses): a pooled deadline stopped or in use by another call since is
// left as it is.
func (d *deadline) pushBack(use uint64) {
	if !d.pooled {
		d.reset()
		return
	}
	d.mu.Lock()
	if d.use == use {
		d.restartLocked()
	}
	d.mu.Unlock()
}

// restartLocked restarts a pooled deadline's timeout unless it was
// stopped. Callers hold mu.
func (d *deadline) restartLocked() {
	if d.req == nil {
		return
	}
	d.when = monoNow() + d.timeout
	d.setLocked(d.timeout)
}

// pause stops the timer until reset.
func (d *deadline) pause() {
	if d.pooled {
		d.mu.Lock()
		d.when = 0 // the timer, should it fire, finds nothing due
		d.mu.Unlock()
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
}

func (d *deadline) stop() {
	if d.pooled {
		if d.halt() {
			callDeadlines.Put(d)
		}
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.cancel != nil {
		d.cancel(context.Canceled)
	}
}

// halt ends a pooled deadline's use, and reports whether it was in use.
func (d *deadline) halt() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	live := d.req != nil
	d.req, d.when = nil, 0 // the timer is left as it is (setLocked)
	return live
}

func (p *Proxy) sessionEnded(key session.Key) {
	for _, rs := range p.current().servers {
		rs.pool.EndSession(key)
	}
}

// resumedFrom is the replica req's session was taken up from ("" when it
// began here): leases of that replica did not come along.
func resumedFrom(req *downstream.Request) string {
	if req == nil || req.Session == nil {
		return ""
	}
	return downstream.Resumed(req.Session)
}
