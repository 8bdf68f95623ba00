package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// JSON-RPC error codes the aggregator itself answers with.
const (
	codeInvalidParams = jsonrpc.CodeInvalidParams
	codeInternal      = jsonrpc.CodeInternalError
)

// ErrTimeout marks a call that ran past its timeout.
var ErrTimeout = errors.New("timed out")

// invocation is one tools/call, whichever transport it arrived on.
type invocation struct {
	name      string
	key       session.Key
	anonymous bool            // key is the shared anonymous one
	args      json.RawMessage // forwarded byte for byte
	task      json.RawMessage // params.task, forwarded byte for byte; nil: not a task
	meta      map[string]json.RawMessage
	token     json.RawMessage // the caller's progress token; nil if none
	// progress delivers one progress notification's params to the caller.
	// It runs on the upstream's reader goroutine, so it only queues.
	progress func(params json.RawMessage)
	// req is the downstream request, for what the upstream sends back
	// during the call (its requests, its log messages).
	req *downstream.Request
}

// invoke routes a call to the instance that serves its session and returns
// the upstream's raw result, or a raw JSON-RPC error object. err is set only
// when the caller went away and no response is due.
func (p *Proxy) invoke(ctx context.Context, inv invocation) (result json.RawMessage, rpcErr *jsonrpc.Error, err error) {
	name := inv.name
	var (
		st       *state
		entry    *Entry
		rs       *runningServer
		grant    *session.Grant
		deadline *deadline
		callCtx  context.Context
		limit    timeLimit
	)
	var decided verdict // the policy's, for the audit log
	defer func(start time.Time) {
		p.observeCall(entry, start, callCtx, result, rpcErr, err)
		if l := p.audit.Load(); l != nil {
			p.auditCall(l, entry, name, inv, decided, start, result, rpcErr, err)
		}
	}(time.Now())
	viaCallTool := false // name came from an mcp_call_tool call
	// A reload may retire the server between the lookup and the lease; the
	// call then looks again and runs on the server's new instance.
	for retries := 0; ; {
		var ok bool
		st = p.current()
		entry, ok = st.catalog.Lookup(name)
		if client := requestClient(inv.req); ok && !st.profileOf(client).tool(entry) {
			// Answered as a name no server exports (hidden.go). entry
			// stays set: the metrics, which only the operator sees, count
			// the call under the tool's own name.
			p.hiddenName(inv.req, hiddenTool, name, entry.Server)
			if viaCallTool && st.search != nil {
				return textResult(true, unknownToolText(st.search.index, name, st.visibility(client))), nil, nil
			}
			ok = false
		}
		if !ok {
			if offer := p.unknownToolLoginOffer(ctx, inv.req, st, name); offer != nil {
				return nil, offer, nil
			}
			return nil, errorObject(codeInvalidParams, "unknown tool %q: no server exports it (it may be filtered out, renamed, or its server is down); call tools/list for the current names%s", name, st.awaitingLogin(requestClient(inv.req))), nil
		}
		if entry.Server == adminServer && entry.Original == callToolName && st.search != nil {
			target, answer := p.callTarget(ctx, st, inv)
			if answer != nil {
				return answer, nil, nil
			}
			// mcp_call_tool is no call of its own: it goes round again as
			// the tool it names, and is limited, traced and counted as that
			// tool's call, once.
			inv, name, viaCallTool = target, target.name, true
			continue
		}
		if entry.Server == adminServer && isDiscoveryTool(entry.Original) {
			return p.discoveryCall(st, entry.Original, inv), nil, nil
		}
		if entry.Server == adminServer {
			return p.admin(st, entry.Original, inv), nil, nil
		}
		rs = st.servers[entry.Server]
		if rs == nil {
			return nil, errorObject(codeInternal, "tool %q: server %q is not running", name, entry.Server), nil
		}
		if retries == 0 { // a retry is the same call: decided once
			if st.rates != nil {
				if over, limit := st.rates.take(principalOf(inv.req), entry.Server); over != nil {
					decided = verdict{outcome: "denied", rule: limit}
					return nil, over, nil
				}
			}
			var denied json.RawMessage
			if denied, decided = p.checkPolicy(ctx, st, entry, inv); denied != nil {
				return denied, nil, nil
			}
		}
		if inv.anonymous && !rs.pool.Stateless() && p.anonWarned.CompareAndSwap(false, true) {
			p.log.Warn("a sessionless client called a stateful server without a lease key; all such calls share one anonymous lease",
				"server", entry.Server, "fix", "set _meta[\""+LeaseMetaKey+"\"] to a conversation id")
		}
		limit = toolLimit(rs.cfg, entry)
		callCtx, deadline = callDeadline(ctx, inv.req, limit.d)
		var err error
		grant, err = rs.pool.AcquireAs(callCtx, inv.key, holderOf(inv.req))
		if err == nil {
			break
		}
		deadline.stop()
		if errors.Is(err, session.ErrClosed) && retries < 3 {
			retries++
			continue
		}
		if offer := p.loginOffer(ctx, inv.req, entry.Server, err); offer != nil {
			return nil, offer, nil
		}
		return nil, errorObject(codeInternal, "server %q: tool %q: %s", entry.Server, name, p.scrub(rs.cfg, err.Error())), nil
	}
	defer deadline.stop()
	defer grant.Done()

	tool := ""
	if entry.Settings.MaxInstances > 0 {
		tool = entry.Server + "/" + entry.Original
	}
	hold, err := st.limits.acquire(callCtx, holderOf(inv.req), tool, entry.Settings.MaxInstances)
	if err != nil {
		var full *limitError
		if errors.As(err, &full) && errors.Is(err, ErrTimeout) {
			return nil, errorObject(codeInternal, "server %q: tool %q: %s calls were in flight for the whole %s set by %s; raise that limit, or %s to let a call wait longer",
				entry.Server, name, full.limit, limit.d, limit.setting, limit.setting), nil
		}
		return nil, errorObject(codeInternal, "server %q: tool %q: %v", entry.Server, name, err), nil
	}
	defer hold.release()

	call := upstream.Call{Name: entry.Original, Arguments: inv.args, Meta: inv.meta, Task: inv.task}
	var (
		task *reservation
		tp   *taskProgress
	)
	if len(inv.task) > 0 {
		if task, rpcErr = p.beginTask(inv); rpcErr != nil {
			return nil, rpcErr, nil
		}
		defer p.tasks.release(task)
		defer p.tasks.expect(grant.Instance)()
	}
	if inv.req != nil {
		call.OnServerRequest = p.relatedTasks(p.serverRequests(inv.req), grant.Instance, inv.req.Session)
		call.Principal = principalOf(inv.req)
		p.bindSession(rs, grant, inv.req)
		p.inflight.add(grant.Instance, inv.req)
		defer p.inflight.remove(grant.Instance, inv.req)
	}
	if inv.progress != nil && len(inv.token) > 0 {
		call.ProgressToken = inv.token
		// Locals, so that inv itself stays on the stack.
		progress, session := inv.progress, inv.session()
		call.OnProgress = func(params json.RawMessage) {
			deadline.reset() // progress proves the call is alive
			progress(p.relatedOut(params, grant.Instance, session))
		}
		if task != nil {
			// A task's progress token outlives the call.
			tp = p.newTaskProgress(grant.Instance, call.OnProgress)
			call.OnProgress, call.KeepProgress = tp.onProgress, tp.keep
		}
	}
	upCtx, span := p.upstreamSpan(callCtx, "tools/call", entry.Original, rs, grant)
	if span != nil {
		if name != entry.Original {
			span.SetExportedName(name)
		}
		// The upstream's spans nest under this call's, in the client's trace.
		call.Meta = span.Meta(call.Meta)
		defer func() { span.End(result, rpcErr, err) }()
	}
	raw, err := grant.Instance.CallTool(upCtx, call)
	if err != nil {
		var upstreamErr *upstream.RPCError
		switch {
		case errors.As(err, &upstreamErr):
			return nil, &jsonrpc.Error{Code: upstreamErr.Code, Message: upstreamErr.Message, Data: upstreamErr.Data}, nil
		case errors.Is(err, ErrTimeout) || (ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)):
			return nil, errorObject(codeInternal, "server %q: tool %q: no result within %s set by %s (cancelled upstream); raise %s if it needs longer", entry.Server, name, limit.d, limit.setting, limit.setting), nil
		case ctx.Err() != nil:
			return nil, nil, ctx.Err() // the client cancelled; no response is due
		default:
			if offer := p.loginOffer(ctx, inv.req, entry.Server, err); offer != nil {
				return nil, offer, nil
			}
			if why := p.cutByReload(entry.Server, rs, err); why != "" {
				return nil, errorObject(codeInternal, "tool %q: %s", name, why), nil
			}
			return nil, errorObject(codeInternal, "server %q: tool %q: %s", entry.Server, name, p.scrub(rs.cfg, err.Error())), nil
		}
	}
	if task != nil {
		if created, ok := p.taskCreated(task, tp, entry.Server, grant.Instance, inv.key, limit, raw); ok {
			return created, nil, nil // a CreateTaskResult has no content to add notes to
		}
	}
	var notes []string
	if grant.Lost {
		notes = append(notes, fmt.Sprintf("Note: the previous dedicated instance of MCP server %q stopped unexpectedly and its state was lost; this call ran on a fresh instance.", entry.Server))
	}
	if grant.Recycled {
		notes = append(notes, fmt.Sprintf("Note: the dedicated instance of MCP server %q was replaced by a fresh one (lease.max_calls or lease.max_age) and its state was reset; this call ran on the fresh instance.", entry.Server))
	}
	if grant.Reclaimed {
		notes = append(notes, fmt.Sprintf("Note: the dedicated instance of MCP server %q this session held was reclaimed for another session while this session went unused (all of the server's lease.max_instances were taken), and its state was lost; this call ran on a fresh instance.", entry.Server))
	}
	if grant.First && !rs.pool.Stateless() {
		grant.Announced() // with the reminder below, or with none when it is off
	}
	if grant.First && rs.cfg.LeaseReminder && !rs.pool.Stateless() {
		notes = append(notes, fmt.Sprintf("You now hold a dedicated instance of MCP server %q for this session. When you no longer need its tools, call mcp_release with {\"serverId\": %q} to free it.", entry.Server, entry.Server))
	}
	if len(notes) > 0 {
		raw = appendText(raw, notes)
	}
	return raw, nil, nil
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
		if pr.server(id) && strings.Contains(f.why, "mcp-aggregator login") {
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

// deadline is a timeout that progress notifications push back.
type deadline struct {
	timeout time.Duration
	timer   *time.Timer
	cancel  context.CancelCauseFunc
}

// callDeadline is newDeadline for a call that is its request's whole work:
// a timeout ends the request's own context (with ErrTimeout as the cause),
// and the call needs no context of its own. The caller's ctx must come from
// req's. stop then only stops the timer: the request's context is the
// transport's to end.
func callDeadline(ctx context.Context, req *downstream.Request, timeout time.Duration) (context.Context, *deadline) {
	if req == nil || req.Cancel == nil {
		return newDeadline(ctx, timeout)
	}
	d := &deadline{timeout: timeout}
	if timeout > 0 {
		d.timer = time.AfterFunc(timeout, func() { req.Cancel(ErrTimeout) })
	}
	return ctx, d
}

func newDeadline(parent context.Context, timeout time.Duration) (context.Context, *deadline) {
	ctx, cancel := context.WithCancelCause(parent)
	d := &deadline{timeout: timeout, cancel: cancel}
	if timeout > 0 {
		d.timer = time.AfterFunc(timeout, func() { cancel(ErrTimeout) })
	}
	return ctx, d
}

func (d *deadline) reset() {
	if d.timer != nil {
		d.timer.Reset(d.timeout)
	}
}

func (d *deadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.cancel != nil {
		d.cancel(context.Canceled)
	}
}

func (p *Proxy) sessionEnded(key session.Key) {
	for _, rs := range p.current().servers {
		rs.pool.EndSession(key)
	}
}
