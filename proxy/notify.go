package proxy

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// What an upstream says outside its responses reaches the downstream
// parties it concerns: a log message the session (or the one request) the
// instance serves, a resource update the sessions subscribed to it, a list
// change every client once (through a relist and commit). Everything here
// runs on an upstream's reader goroutine, so it only queues.

// inflight knows which downstream requests are running on each instance,
// so that an upstream's notification during one request goes on that
// request's stream. An instance's list lives while requests run on it,
// and the last instance whose list emptied keeps its empty one until
// another's empties, so that calls made one at a time to one instance
// leave its entry where it is; other emptied lists are kept for reuse (up
// to maxSpareSets), so that a call allocates nothing here. A list in the
// order the calls began, not a set: a call's add appends, and its remove
// finds it by a scan from the oldest, which calls that end roughly in turn
// keep short, and which costs less than a map's hashing for the few calls
// an instance mostly runs.
type inflight struct {
	mu    sync.Mutex
	on    map[*upstream.Instance]*running
	idle  *upstream.Instance // its list in on is empty; nil: none is
	spare []*running
}

// running are the requests running on one instance, oldest first, each
// as many times as it was added.
type running struct{ reqs []*downstream.Request }

const maxSpareSets = 64

// add records req as running on inst, until remove: a request added twice
// runs there until it is removed twice.
func (f *inflight) add(inst *upstream.Instance, req *downstream.Request) {
	f.mu.Lock()
	r := f.on[inst]
	if inst == f.idle {
		f.idle = nil
	}
	if r == nil {
		if f.on == nil {
			f.on = map[*upstream.Instance]*running{}
		}
		if n := len(f.spare); n > 0 {
			r, f.spare = f.spare[n-1], f.spare[:n-1]
		} else {
			r = &running{}
		}
		f.on[inst] = r
	}
	r.reqs = append(r.reqs, req)
	f.mu.Unlock()
}

// remove undoes one add of req on inst; it changes nothing when there is
// none.
func (f *inflight) remove(inst *upstream.Instance, req *downstream.Request) {
	f.mu.Lock()
	if r := f.on[inst]; r != nil {
		if i := slices.Index(r.reqs, req); i >= 0 {
			r.reqs = slices.Delete(r.reqs, i, i+1)
		}
		if len(r.reqs) == 0 && f.idle != inst {
			if f.idle != nil {
				f.drop(f.idle)
			}
			f.idle = inst
		}
	}
	f.mu.Unlock()
}

// drop forgets inst, whose list is empty, keeping the list for reuse.
// Callers hold mu.
func (f *inflight) drop(inst *upstream.Instance) {
	r := f.on[inst]
	delete(f.on, inst)
	if len(f.spare) < maxSpareSets {
		f.spare = append(f.spare, r)
	}
}

// only returns the one request running on inst, if there is exactly one
// (however many of its calls run there).
func (f *inflight) only(inst *upstream.Instance) *downstream.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.on[inst]
	if r == nil || len(r.reqs) == 0 {
		return nil
	}
	for _, req := range r.reqs[1:] {
		if req != r.reqs[0] {
			return nil
		}
	}
	return r.reqs[0]
}

// maxSubscriptions bounds the resource subscriptions one session holds,
// and the URIs one subscriptions/listen stream names: each costs the
// aggregator and the upstream behind it memory for as long as it lasts,
// and a request upstream when it begins and ends.
const maxSubscriptions = 1000

// Log levels, lowest first (RFC 5424 as MCP uses them).
var logLevels = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// defaultLogLevel applies to a session that never set one.
const defaultLogLevel = 1 // info

func (p *Proxy) setLevel(req *downstream.Request) *jsonrpc.Message {
	var params struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(req.Msg.Params, &params)
	level, ok := logLevels[params.Level]
	if !ok {
		return failure(jsonrpc.CodeInvalidParams, "logging/setLevel: %q is not a level (debug, info, notice, warning, error, critical, alert, emergency)", params.Level)
	}
	if req.Sessionless() {
		return failure(jsonrpc.CodeInvalidRequest, "logging/setLevel needs a session; sessionless clients set io.modelcontextprotocol/logLevel in a request's _meta")
	}
	p.session(req.Session).setLevel(level)
	return answer([]byte(`{}`))
}

// upstreamNotified takes an upstream notification other than progress and
// list changes.
func (p *Proxy) upstreamNotified(server string, inst *upstream.Instance, n upstream.Notification) {
	switch n.Method {
	case "notifications/message":
		p.logMessage(server, inst, n.Params)
	case "notifications/resources/updated":
		p.resourceUpdated(server, inst, n.Params)
	case "notifications/tasks/status":
		p.taskStatus(inst, n.Params)
	case "notifications/tasks":
		p.extensionTaskNote(inst, n.Params)
	default:
		// Anything else that belongs to a request goes on its stream.
		// One about a task is its owner's alone, under the owner's id.
		owner, related, held := p.relatedNote(inst, n.Method, n.Params)
		switch req := p.inflight.only(inst); {
		case held:
			// delivered with its task's CreateTaskResult
		case req != nil && (!related || sameSession(req.Session, owner)):
			req.Send(&jsonrpc.Message{Method: n.Method, Params: p.relatedOut(n.Params, inst, req.Session)})
		case related && owner != nil && p.admits(p.sessionClient(owner), server):
			owner.Notify(&jsonrpc.Message{Method: n.Method, Params: p.relatedOut(n.Params, inst, owner)})
		}
	}
}

// badLogLevel drops a log message whose level is none of MCP's.
func (p *Proxy) badLogLevel(server string, params json.RawMessage) {
	level, _ := tasks.StringAt(params, []string{"level"})
	if len(level) > 40 {
		level = level[:40] + "…"
	}
	p.log.Debug("upstream sent a log message whose level is none of MCP's; dropped", "server", server, "level", level)
}

func (p *Proxy) logMessage(server string, inst *upstream.Instance, params json.RawMessage) {
	level, msg, ok := logNotification(server, params)
	if !ok {
		p.badLogLevel(server, params)
		return
	}
	params = msg.Params
	// A message about a task is its owner's alone, under the owner's id.
	owner, related, held := p.relatedNote(inst, "notifications/message", params)
	if held {
		return // delivered with its task's CreateTaskResult
	}
	if related {
		params = p.relatedOut(params, inst, owner)
	}
	msg = &jsonrpc.Message{Method: "notifications/message", Params: params}
	wants := func(s downstream.Session) bool { return p.takesLog(s, level) }
	if req := p.inflight.only(inst); req != nil && (!related || sameSession(req.Session, owner)) {
		if req.Sessionless() {
			// 2026-07-28: the request's own level, and nothing without one
			// (over stdio too, where such a request has the connection's session).
			reqLevel, ok := logLevels[metaString(req.Msg.Params, downstream.MetaLogLevel)]
			if !ok || level < reqLevel || req.Send(msg) {
				return
			}
		} else if !wants(req.Session) || req.Send(msg) {
			return
		}
		// The request's stream took no more: its response went out as the
		// message arrived (or the stream is full). It goes where a message
		// arriving just after the response would.
		p.log.Debug("an upstream log message came as its request ended; sent outside the request", "server", server)
	}
	if related {
		if owner != nil && wants(owner) && p.admits(p.sessionClient(owner), server) {
			owner.Notify(msg)
		}
		return
	}
	if protocol.Modern(inst.Protocol()) {
		// A 2026-07-28 upstream logs for one request only; with none, or
		// several, running, whose it is is unknown: it goes to no one else.
		return
	}
	rs := p.current().servers[server]
	if rs == nil {
		return
	}
	if !rs.pool.Stateless() {
		if key, ok := rs.pool.Holder(inst); ok {
			if s := p.clients.byLeaseKey(key); s != nil && wants(s.ds) && p.admits(p.sessionClient(s.ds), server) {
				s.ds.Notify(msg)
			}
		}
		return
	}
	for _, s := range p.sessions.live() {
		if wants(s.ds) && p.admits(p.sessionClient(s.ds), server) {
			s.ds.Notify(msg)
		}
	}
}

func (p *Proxy) resourceUpdated(server string, inst *upstream.Instance, params json.RawMessage) {
	var head struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &head) != nil || head.URI == "" {
		return
	}
	p.forgetResource(inst, head.URI)
	// A session is no subscription stream: the upstream's subscription id,
	// should it name one, is not the session's to see. An app resource is
	// named as the server's app resources are exported.
	out := params
	if naming.IsAppURI(head.URI) {
		out = withMember(params, "uri", naming.AppURI(server, head.URI))
	}
	msg := &jsonrpc.Message{Method: "notifications/resources/updated", Params: withSubscriptionID(out, nil)}
	rs := p.current().servers[server]
	if rs == nil {
		return
	}
	var targets []*Session
	if !rs.pool.Stateless() {
		if key, ok := rs.pool.Holder(inst); ok {
			if s := p.clients.byLeaseKey(key); s != nil {
				targets = append(targets, s)
			}
		}
	} else {
		targets = p.sessions.live()
	}
	for _, s := range targets {
		// Only to a session offered resource subscriptions at its initialize.
		if s.subscribed(server, head.URI) && s.offered().subscribe && p.admits(p.sessionClient(s.ds), server) {
			s.ds.Notify(msg)
		}
	}
	p.clients.resourceUpdated(server, head.URI, out, func(client string) bool { return p.admits(client, server) })
}

// rootsChanged passes a session's notifications/roots/list_changed to the
// instances it leases. It runs on the session's reader goroutine, so it
// only queues (see upstreamNotes): an instance that does not read holds up
// neither the session nor the other instances.
func (p *Proxy) rootsChanged(s downstream.Session) {
	key := sessionLeaseKey(s)
	for _, rs := range p.current().servers {
		if inst, ok := rs.pool.Leased(key); ok {
			p.notes.send(p.life, p.log, inst, "notifications/roots/list_changed")
		}
	}
}

// invalidLogLevel refuses a 2026-07-28 request whose _meta names a log level
// that is not one; nil when there is none or it is valid.
func invalidLogLevel(req *downstream.Request) *jsonrpc.Message {
	if !protocol.Modern(req.Protocol) || !rawjson.Mentions(req.Msg.Params, downstream.MetaLogLevel) {
		return nil
	}
	raw, ok := requestMeta(req.Msg.Params)[downstream.MetaLogLevel]
	if !ok {
		return nil
	}
	if level, isString := rawjson.String(raw); isString {
		if _, known := logLevels[level]; known {
			return nil
		}
	}
	return failure(jsonrpc.CodeInvalidParams, "%s: _meta[%q] is %s, not a log level (debug, info, notice, warning, error, critical, alert, emergency)",
		req.Msg.Method, downstream.MetaLogLevel, raw)
}

// metaString reads a string member of params._meta.
func metaString(params json.RawMessage, key string) string {
	var v string
	if raw, ok := requestMeta(params)[key]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}
