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
// is set only when the caller went away and no response is due. send
// works on a copy of inv, which it changes as it goes (the tool an
// mcp_call_tool call names, the params as they go up).
//
// send takes a forward through its steps on the caller's goroutine,
// waiting wherever one waits; start (start.go) takes a tools/call through
// the same steps without waiting, and hands the rest to a goroutine where
// one would wait.
func (p *Proxy) send(ctx context.Context, inv *invocation) (json.RawMessage, *jsonrpc.Error, error) {
	// A copy of inv, kept in f: a pointer kept there would move the
	// caller's inv to the heap, as everything f holds escapes together.
	f := forward{p: p, ctx: ctx, inv: *inv}
	f.begin()
	// One deferred call ends every call, whatever it came to hold: a
	// deferred call each costs more than the tests in this one.
	defer f.end()
	f.run()
	return f.result, f.rpcErr, f.err
}

// forward is one request on its way through the forwarder (send): what it
// resolved and holds, and once it is answered, its answer.
type forward struct {
	p   *Proxy
	ctx context.Context
	inv invocation // what send was given, which the steps change as they go

	call     bool // a tools/call
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
	decided  verdict // the policy's and rate limits', for the audit log
	// bound is the Session of the request's downstream session, for a call
	// of a stateful server: looked up once, for the lease's owner, its
	// binding and whether the session ended meanwhile.
	bound *Session
	// start is when a tools/call came, on the monotonic clock (monoNow): one
	// clock read, which its deadline shares when nothing could wait between
	// them (armedAt). A clock read is not cheap on every machine.
	start   time.Duration
	isError toolErrorFlag // of the result returned, when send read it
	held    holdings

	awaited, admitted    bool
	loginOffers          int // to a 2026-07-28 client (askLogin)
	passes, retries      int
	acquired, prepared   bool // the steps done (acquire, prepare)
	ended                bool // end ran
	bridgedTask, extTask bool
	slot                 *cacheSlot
	task                 *tasks.Reservation
	tp                   *taskProgress
	up                   upstream.Request
	upCtx                context.Context
	span                 *telemetry.Span

	// The answer: the raw result, or a JSON-RPC error object; err only
	// when the caller went away and no response is due.
	result json.RawMessage
	rpcErr *jsonrpc.Error
	err    error
}

// step is where a step of a forward left it.
type step uint8

const (
	stepOn       step = iota // done: on to the next step
	stepAnswered             // the forward has its answer
	stepWaits                // it would wait: nothing of the step was done (a step that may not wait)
)

// begin starts the forward of inv.
func (f *forward) begin() {
	f.call = f.inv.toolCall()
	f.isError = unread
	if f.call {
		f.start = monoNow()
	}
}

// run takes f from the step it stands at to its answer, waiting wherever a
// step waits.
func (f *forward) run() {
	if !f.acquired && f.acquire(false) != stepOn {
		return
	}
	if !f.prepared && f.prepare(false) != stepOn {
		return
	}
	raw, derr := f.to.Do(f.upCtx, f.up)
	f.finish(raw, derr, false)
}

// answered sets f's answer to the error rpcErr and reports stepAnswered.
func (f *forward) answered(rpcErr *jsonrpc.Error) step {
	f.rpcErr = rpcErr
	return stepAnswered
}

// acquire resolves the target and acquires an instance of it, with the
// call's deadline armed. With atOnce it does only what needs no wait: a
// tools/call of a tool the catalog exports as it stands, to a shared
// server, without a policy that may ask.
func (f *forward) acquire(atOnce bool) step {
	p, inv := f.p, &f.inv
	for {
		f.passes++
		st := p.current()
		f.st, f.server = st, inv.server
		if f.call {
			if atOnce && !inv.resolvesAtOnce(st) {
				return stepWaits
			}
			var (
				rpcErr *jsonrpc.Error
				again  bool
			)
			f.entry, f.counted, rpcErr, again = p.resolveTool(f.ctx, st, inv, &f.awaited, &f.loginOffers)
			if rpcErr != nil {
				return f.answered(rpcErr)
			}
			if again {
				continue
			}
			if mismatch := paramHeaderMismatch(inv.req, f.entry); mismatch != nil {
				return f.answered(mismatch)
			}
			f.server = f.entry.Server
		}
		if f.server == adminServer {
			// Its tools answer at once, and hold nothing of an upstream's.
			f.to, f.callCtx, f.deadline = &ownServer{p: p, st: st, key: inv.key, client: requestClient(inv.req)}, f.ctx, noDeadline()
			return f.got()
		}
		rs := st.servers[f.server]
		f.rs = rs
		if inv.onTask != nil {
			f.limit = inv.limit
			f.callCtx, f.deadline = newDeadline(f.ctx, f.limit.d)
			grant, rpcErr, gone := p.taskInstance(f.ctx, f.callCtx, rs, inv)
			if grant != nil {
				f.to, f.grant = grant.Instance, grant
				return f.got()
			}
			f.deadline.stop()
			if gone {
				f.err = f.ctx.Err()
				return stepAnswered
			}
			return f.answered(rpcErr)
		}
		if rs == nil {
			return f.answered(errorObject(codeInternal, "%s: the server is not running", inv.subject(f.server)))
		}
		if f.call && !f.admitted { // a retry is the same call: decided once
			if atOnce && st.policy != nil {
				return stepWaits // the policy may ask the user
			}
			f.admitted = true
			var rpcErr *jsonrpc.Error
			if rpcErr, f.decided = p.admitCall(f.ctx, st, f.entry, inv); rpcErr != nil {
				return f.answered(rpcErr)
			}
			if f.decided.denied != nil {
				f.result = f.decided.denied
				return stepAnswered
			}
		}
		if inv.anonymous && !rs.pool.Stateless() && p.anonWarned.CompareAndSwap(false, true) {
			p.log.Warn("a sessionless client called a stateful server without a lease key; all such calls share one anonymous lease",
				"server", f.server, "fix", "set _meta[\""+LeaseMetaKey+"\"] to a conversation id")
		}
		if f.call {
			f.limit = toolLimit(rs.cfg, f.entry)
			f.callCtx, f.deadline = callDeadline(f.ctx, inv.req, f.limit.d, armedAt(f.start, f.passes, st))
		} else {
			// Not necessarily its request's whole work (a listen stream
			// subscribes on its own request): a context of its own.
			f.limit = requestLimit(rs.cfg)
			f.callCtx, f.deadline = newDeadline(f.ctx, f.limit.d)
		}
		claim := session.Claim{Holder: holderOf(inv.req)}
		f.bound = nil
		if !rs.pool.Stateless() && inv.req != nil {
			// A leased instance serves this host alone: it declares the
			// host's own extension settings (upstream.ForHost).
			claim.Host, claim.ForHost = capabilitiesOf(inv.req), true
			var holds *Session
			if inv.req.Sessionless() || inv.req.Session == nil {
				// The lease is its conversation's, which needs room for a Session.
				conv, cerr := p.sessions.conversation(inv.key)
				if cerr != nil {
					f.deadline.stop()
					return f.answered(errorObject(codeInternal, "%s: %v", inv.subject(f.server), cerr))
				}
				holds = conv
			} else {
				f.bound = p.session(inv.req.Session)
				holds = f.bound
			}
			// The lease keeps who holds it, for a profile edit to judge
			// (revokeLeases).
			claim.Owner = holds.leaseOwner(inv.req)
		}
		var (
			grant *session.Grant
			aerr  error
		)
		if atOnce {
			var ok bool
			if grant, aerr, ok = rs.pool.TryAcquireFor(inv.key, claim); !ok {
				f.deadline.stop()
				return stepWaits // a lease to start, or room to wait for
			}
		} else {
			grant, aerr = rs.pool.AcquireFor(f.callCtx, inv.key, claim)
		}
		if aerr == nil {
			f.to, f.grant = grant.Instance, grant
			return f.got()
		}
		f.deadline.stop()
		if errors.Is(aerr, session.ErrClosed) && f.retries < 3 {
			f.retries++
			continue
		}
		if atOnce {
			return stepWaits // the error may offer a login, which waits for the person
		}
		if again, offer, handled := p.askLogin(f.ctx, inv.req, f.server, aerr, &f.loginOffers); handled {
			if again {
				continue
			}
			return f.answered(offer)
		}
		if offer := p.loginOffer(f.ctx, inv.req, f.server, aerr); offer != nil {
			return f.answered(offer)
		}
		return f.answered(errorObject(codeInternal, "%s: %s", inv.subject(f.server), p.scrub(rs.cfg, aerr.Error())))
	}
}

// got records the target acquire found, and what the forward now holds.
func (f *forward) got() step {
	f.held.deadline, f.held.grant = f.deadline, f.grant
	f.acquired = true
	return stepOn
}

// resolvesAtOnce reports whether resolveTool resolves inv under st
// without waiting or asking: a tool the catalog exports, which the
// caller's profile shows, of a server other than the aggregator's own.
func (inv *invocation) resolvesAtOnce(st *state) bool {
	e := inv.entry
	if inv.entryIn != st.catalog {
		var ok bool
		if e, ok = st.catalog.Lookup(inv.name); !ok {
			return false
		}
	}
	return e != nil && e.Server != adminServer && st.profileOf(requestClient(inv.req)).tool(e)
}

// prepare takes what the call needs beside its instance (its share of the
// call limits, its task) and builds the request that goes upstream. With
// atOnce it does only what needs no wait: a call bounded by instance
// limits, or that runs as a task, waits.
func (f *forward) prepare(atOnce bool) step {
	p, inv, rs, grant, entry, call := f.p, &f.inv, f.rs, f.grant, f.entry, f.call
	bounded := call && grant != nil && f.st.limits.bounds(entry.Settings.MaxInstances)
	f.bridgedTask = call && grant != nil && len(inv.task) == 0 && p.bridgesTask(inv.req, rs, grant.Instance, entry)
	if atOnce && (bounded || len(inv.task) > 0 || f.bridgedTask || !f.bindsAtOnce()) {
		return stepWaits
	}
	if bounded {
		tool := ""
		if entry.Settings.MaxInstances > 0 {
			tool = entry.Server + "/" + entry.Original
		}
		hold, lerr := f.st.limits.acquire(f.callCtx, holderOf(inv.req), tool, entry.Settings.MaxInstances)
		if lerr != nil {
			var full *limitError
			if errors.As(lerr, &full) && errors.Is(lerr, ErrTimeout) {
				return f.answered(errorObject(codeInternal, "%s: %s calls were in flight for the whole %s set by %s; raise that limit, or %s to let a call wait longer",
					inv.subject(f.server), full.limit, f.limit.d, f.limit.setting, f.limit.setting))
			}
			return f.answered(errorObject(codeInternal, "%s: %v", inv.subject(f.server), lerr))
		}
		f.held.limits, f.held.limited = hold, true
	}
	if f.bridgedTask {
		inv.task = json.RawMessage(`{}`) // the extension's task, as a 2025-11-25 task upstream
		if params, ok := rawjson.Set(inv.params, "task", func([]byte) []byte { return inv.task }); ok {
			inv.params = params // the params go up as the client sent them, edited where they stand
		}
	}
	// A session's task on a server that speaks the tasks extension: the
	// call goes up declaring the extension, without params.task.
	f.extTask = call && grant != nil && len(inv.task) > 0 && !f.bridgedTask && inv.req != nil && !inv.req.Sessionless() &&
		protocol.Modern(grant.Instance.Protocol()) && offersTasksExtension(rs)
	if f.extTask {
		inv.params = rawjson.Without(inv.params, "task")
	}
	slot, cached, hit := p.cachedResult(inv, rs, grant)
	if hit {
		f.result = cached
		return stepAnswered
	}
	f.slot = slot
	up := upstream.Request{Method: inv.method, Params: inv.params}
	if call {
		var cerr error
		if up, cerr = (upstream.Call{Name: entry.Original, Params: inv.params, Arguments: inv.args, Withhold: withheldMeta}).Request(); cerr != nil {
			return f.answered(errorObject(codeInternal, "%s: %v", inv.subject(f.server), cerr))
		}
	}
	if len(inv.task) > 0 && grant != nil {
		var rpcErr *jsonrpc.Error
		if f.task, rpcErr = p.beginTask(*inv); rpcErr != nil {
			return f.answered(rpcErr)
		}
		f.held.task = f.task
		f.held.expected = p.tasks.Expect(grant.Instance)
		if rs != nil && (rs.pool.Stateless() || f.bridgedTask) {
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
				p.bindSession(rs, grant, inv.req, inv.key, f.bound)
			}
			p.inflight.add(grant.Instance, inv.req)
			f.held.running, f.held.req = grant.Instance, inv.req
		}
	} else if inv.ask != nil && grant != nil {
		up.OnServerRequest = inv.ask
	}
	if inv.req != nil && len(inv.token) > 0 && grant != nil {
		up.ProgressToken = inv.token
		// Locals, so that the closure keeps no more than it needs.
		send, session, inst, deadline := inv.req.Send, inv.session(), grant.Instance, f.deadline
		use := deadline.uses()
		up.OnProgress = func(params json.RawMessage) {
			deadline.pushBack(use) // progress proves the call is alive
			send(&jsonrpc.Message{Method: "notifications/progress", Params: p.relatedOut(params, inst, session)})
		}
		if f.task != nil {
			// A task's progress token outlives the call: a copy of its
			// own, since the request's bytes may share the buffer the
			// transport read them into, which the token would keep.
			f.tp = p.newTaskProgress(inst, up.OnProgress)
			up.OnProgress, up.KeepProgress = f.tp.onProgress, f.tp.keep
			up.ProgressToken = append(json.RawMessage(nil), inv.token...)
		}
	}
	f.upCtx = f.callCtx
	if grant != nil {
		tool := ""
		if call {
			tool = entry.Original
		}
		f.upCtx, f.span = p.upstreamSpan(f.callCtx, inv.method, tool, rs, grant)
		if f.span != nil {
			if call && inv.name != entry.Original {
				f.span.SetExportedName(inv.name)
			}
			// The upstream's spans nest under this request's, in the
			// client's trace.
			up.Meta = f.span.Meta(nil)
		}
	}
	up.OnServerRequest = slot.watch(up.OnServerRequest)
	if call && grant != nil {
		f.upCtx = p.callerFor(f.upCtx, inv.req, rs, grant.Instance)
	}
	if call && grant != nil && (declaresTasksExtension(inv.req) || f.extTask) {
		f.upCtx = upstream.WithTasksExtension(f.upCtx) // the upstream may answer with a task
	}
	f.up = up
	f.prepared = true
	return stepOn
}

// bindsAtOnce reports whether binding the call's instance to its session
// (bindSession) does nothing that waits: the instance is shared, or bound
// to the session already, or the lease is a conversation's, which follows
// no subscriptions.
func (f *forward) bindsAtOnce() bool {
	req := f.inv.req
	if f.grant == nil || f.rs.pool.Stateless() || req == nil || req.Sessionless() || req.Session == nil {
		return true
	}
	s := f.bound
	if s == nil {
		s = f.p.session(req.Session)
	}
	return s.holds(f.grant.Instance)
}

// finish takes the upstream's answer to the request (raw, or derr) to the
// forward's answer. With atOnce it does only what needs no wait: an error,
// which may offer a login, or a task where none was asked for, waits.
func (f *forward) finish(raw json.RawMessage, derr error, atOnce bool) step {
	p, inv, grant, call := f.p, &f.inv, f.grant, f.call
	if atOnce && derr != nil {
		return stepWaits
	}
	for derr != nil && f.ctx.Err() == nil {
		// A 2026-07-28 client is offered the login the call needs, and the
		// call is tried again once it accepted; the wait for the person is
		// not the server's: the call's timeout starts again after it.
		f.deadline.pause()
		again, offer, handled := p.askLogin(f.ctx, inv.req, f.server, derr, &f.loginOffers)
		if !handled {
			f.deadline.reset()
			break
		}
		if !again {
			return f.answered(offer)
		}
		f.deadline.reset()
		raw, derr = f.to.Do(f.upCtx, f.up)
	}
	if derr != nil {
		var upstreamErr *upstream.RPCError
		switch {
		case errors.As(derr, &upstreamErr):
			return f.answered(&jsonrpc.Error{Code: upstreamErr.Code, Message: upstreamErr.Message, Data: upstreamErr.Data})
		case errors.Is(derr, ErrTimeout) || (f.ctx.Err() == nil && errors.Is(derr, context.DeadlineExceeded)):
			hint := inv.hint
			if hint == "" {
				hint = "raise " + f.limit.setting + " if it needs longer"
			}
			return f.answered(errorObject(codeInternal, "%s: no result within %s set by %s (cancelled upstream); %s",
				inv.subject(f.server), f.limit.d, f.limit.setting, hint))
		case f.ctx.Err() != nil:
			f.err = f.ctx.Err() // the client cancelled; no response is due
			return stepAnswered
		default:
			if offer := p.loginOffer(f.ctx, inv.req, f.server, derr); offer != nil {
				return f.answered(offer)
			}
			var cfg *config.Server
			if f.rs != nil {
				cfg = f.rs.cfg
				if why := p.cutByReload(f.server, f.rs, derr); why != "" {
					return f.answered(errorObject(codeInternal, "%s: %s", inv.label(), why))
				}
			}
			return f.answered(errorObject(codeInternal, "%s: %s", inv.subject(f.server), p.scrub(cfg, derr.Error())))
		}
	}
	taskHandle, rawIsError := false, unread
	if call && grant != nil {
		taskHandle, rawIsError = resultHead(raw)
		if rawIsError == unread {
			taskHandle = isTaskHandle(raw)
		}
	}
	if call && grant != nil && f.task == nil && taskHandle {
		if atOnce {
			return stepWaits
		}
		f.result, f.rpcErr = p.taskHandle(*inv, f.entry.Server, grant.Instance, raw)
		return stepAnswered // a task handle has no content to add notes to, and is never cached
	}
	if f.extTask && f.task != nil && taskHandle {
		f.tp.drop()
		f.result, f.rpcErr = p.extensionTaskCreated(f.task, f.entry.Server, grant.Instance, inv.key, f.limit, raw)
		return stepAnswered
	}
	if f.task != nil {
		if created, ok := p.taskCreated(f.task, f.tp, f.entry.Server, grant.Instance, inv.key, f.limit, raw); ok {
			if f.bridgedTask {
				created = extensionHandle(created)
			}
			f.result = created // a CreateTaskResult has no content to add notes to
			return stepAnswered
		}
	}
	if call && grant != nil {
		raw = leaseNotes(raw, f.rs, grant, inv.req) // text added to content: isError stays
		f.isError = rawIsError
	}
	p.keepResult(f.slot, raw)
	f.result = raw
	return stepAnswered
}

// end gives back what the forward holds, and counts and audits a
// tools/call with its answer.
func (f *forward) end() {
	if f.ended {
		return
	}
	f.ended = true
	p, inv := f.p, &f.inv
	if f.span != nil {
		f.span.End(f.result, f.rpcErr, f.err)
	}
	f.held.release(p)
	if inv.req != nil && !inv.req.Sessionless() && (f.rs == nil || !f.rs.pool.Stateless()) && !p.sessions.aliveAs(f.bound, inv.req.Session) {
		// The session ended while the request ran: a lease it took
		// after the session's leases were ended must not outlive it.
		// (A sessionless request's lease is its _meta conversation's,
		// not the session's.) A stateless server's call takes none.
		p.sessionEnded(inv.key)
	}
	if !f.call {
		return
	}
	counted := f.counted
	if counted == nil {
		counted = f.entry
	}
	if p.opts.Observer == nil && p.audit.Load() == nil {
		return
	}
	elapsed := monoNow() - f.start
	p.observeCall(counted, elapsed, f.callCtx, f.result, f.rpcErr, f.err, f.isError)
	if l := p.audit.Load(); l != nil {
		p.auditCall(l, f.entry, inv.name, *inv, f.decided, time.Now(), elapsed, f.result, f.rpcErr, f.err)
	}
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
