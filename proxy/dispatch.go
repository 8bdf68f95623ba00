package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/mcp-aggregator/mcp-aggregator/bridge"
	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Handle serves a request, in a span of its own when tracing is on.
func (p *Proxy) Handle(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	req.Profile = p.current().requestProfile(req.Caller(), req.View)
	if p.opts.Tracer == nil {
		return p.dispatch(ctx, req)
	}
	return p.traced(ctx, req)
}

// dispatch answers a request, whichever transport it came on, its result
// encoded for the request's generation (see encode).
func (p *Proxy) dispatch(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	return p.encode(req, p.route(ctx, req))
}

// route is the dispatcher: one path per method, raw params in, raw JSON
// out.
func (p *Proxy) route(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	if bad := invalidLogLevel(req); bad != nil {
		return bad
	}
	ctx = p.withCallerLogLevel(ctx, req)
	switch req.Msg.Method {
	case "tools/call":
		if !bridge.Bridgeable(req) {
			return p.toolsCall(ctx, req) // and no method value to allocate
		}
		return p.bridged(ctx, req, p.toolsCall)
	case "tools/list":
		return p.toolsList(ctx, req)
	case "initialize":
		return p.initialize(req)
	case "ping":
		return answer([]byte(`{}`))
	case "server/discover":
		return p.discover(req)
	case "subscriptions/listen":
		return p.listen(ctx, req)
	case "resources/list":
		return p.resourcesList(ctx, req, "resources")
	case "resources/templates/list":
		return p.resourcesList(ctx, req, "resourceTemplates")
	case "resources/read":
		return p.bridged(ctx, req, p.resourceRequest)
	case "resources/subscribe", "resources/unsubscribe":
		return p.resourceRequest(ctx, req)
	case "prompts/list":
		return p.resourcesList(ctx, req, "prompts")
	case "prompts/get":
		return p.bridged(ctx, req, p.promptsGet)
	case "completion/complete":
		return p.complete(ctx, req)
	case "logging/setLevel":
		return p.setLevel(req)
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/update":
		if protocol.Modern(req.Protocol) {
			return p.extensionTaskRequest(ctx, req) // the tasks extension's
		}
		if req.Msg.Method == "tasks/update" {
			return failure(jsonrpc.CodeMethodNotFound, "method not found: tasks/update is the 2026-07-28 tasks extension's; a session's tasks (protocol 2025-11-25) take their input through tasks/result")
		}
		return p.taskRequest(ctx, req)
	case "tasks/list":
		return p.tasksList(ctx, req)
	default:
		return failure(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Msg.Method)
	}
}

// Notified takes client notifications (cancellation is the transport's).
func (p *Proxy) Notified(_ context.Context, s downstream.Session, msg *jsonrpc.Message) {
	if msg.Method == "notifications/roots/list_changed" && s != nil {
		p.rootsChanged(s)
	}
}

// SessionOpened registers a session for notifications.
func (p *Proxy) SessionOpened(s downstream.Session) { p.sessions.open(s) }

// SessionClosed ends the session: its Session's Close.
func (p *Proxy) SessionClosed(s downstream.Session) { p.sessions.take(s).Close() }

func failure(code int, format string, args ...any) *jsonrpc.Message {
	return jsonrpc.Failure(nil, jsonrpc.Errorf(code, format, args...))
}

// answer answers with body; encode adds what the request's generation
// requires of it.
func answer(body json.RawMessage) *jsonrpc.Message {
	return &jsonrpc.Message{Result: body}
}

// serverInfo is the aggregator's own identity.
func (p *Proxy) serverInfo() map[string]string {
	return map[string]string{"name": "mcp-aggregator", "version": p.opts.Version}
}

// offerable is what initialize and server/discover offer: what the enabled
// servers offer together, and, while the first load still runs, every list
// the aggregator serves. A session keeps what it was offered for its life,
// and initialize must not wait for a slow upstream (SPEC §7), so a client
// that initializes as the gateway starts (IDEs do) is offered what servers
// still starting may bring; a list no server fills is answered empty.
// A client with a profile is offered what its profile's servers offer.
func (p *Proxy) offerable(client string) catalog.Offers {
	c := p.clientSurface(p.current(), client).Offers()
	if p.loading() {
		c.Resources, c.Subscribe, c.Prompts, c.Completions, c.Logging = true, true, true, true, true
	}
	return c
}

// loading reports whether the first load still runs.
func (p *Proxy) loading() bool {
	select {
	case <-p.loaded:
		return false
	default:
		return true
	}
}

// everyTaskOperation is the tasks capability with every operation the
// aggregator relays.
var everyTaskOperation = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}

// offeredTasks is the tasks capability initialize offers, or nil: what the
// servers declare together, and, while the first load still runs, every
// operation, for the reason offerable gives: a client must not call a tool
// as a task unless tools.call was offered at initialize, so a session not
// offered it could never use a tool that requires a task. Each tool's
// execution.taskSupport still says whether it runs as one.
func (p *Proxy) offeredTasks(client string) map[string]any {
	if p.loading() {
		return everyTaskOperation
	}
	if extensionServers(p.current(), client) != nil {
		// Bridged to a server of the tasks extension (extensionbridge.go).
		return everyTaskOperation
	}
	return p.tasksCapability(client)
}

// offeredCapabilities is the capabilities object for what the enabled servers
// offer together; with session, for initialize, less the extensions
// offered to sessionless clients only.
func offeredCapabilities(c catalog.Offers, session bool) map[string]any {
	caps := map[string]any{"tools": map[string]any{"listChanged": true}}
	if c.Resources {
		caps["resources"] = map[string]any{"subscribe": c.Subscribe, "listChanged": true}
	}
	if c.Prompts {
		caps["prompts"] = map[string]any{"listChanged": true}
	}
	if c.Completions {
		caps["completions"] = map[string]any{}
	}
	if c.Logging {
		caps["logging"] = map[string]any{}
	}
	ext := c.Extensions
	if session {
		for id := range sessionlessExtensions {
			if _, ok := ext[id]; ok {
				ext = maps.Clone(ext)
				delete(ext, id)
			}
		}
	}
	if len(ext) > 0 {
		caps["extensions"] = ext
	}
	return caps
}

func (p *Proxy) initialize(req *downstream.Request) *jsonrpc.Message {
	var params struct {
		Version string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(req.Msg.Params, &params); err != nil || params.Version == "" {
		return failure(jsonrpc.CodeInvalidParams, "initialize needs params.protocolVersion")
	}
	// The client's version when it is one the session generation has;
	// else the newest, and the client decides whether it can go on.
	version := params.Version
	if !protocol.Supported(version) || protocol.Modern(version) {
		version = protocol.LatestSession
	}
	c := p.offerable(req.Profile)
	caps := offeredCapabilities(c, true)
	if req.Session != nil {
		// The session hears of list changes, and gets log messages, only
		// for what it is offered.
		p.session(req.Session).setOffer(offer{resources: c.Resources, subscribe: c.Resources && c.Subscribe, prompts: c.Prompts, logging: c.Logging})
	}
	// Tasks as 2025-11-25 has them: a session's; not for server/discover.
	if tasks := p.offeredTasks(req.Profile); tasks != nil {
		caps["tasks"] = tasks
	}
	body, _ := rawjson.Marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"serverInfo":      p.serverInfo(),
	})
	return &jsonrpc.Message{Result: body}
}

func (p *Proxy) discover(req *downstream.Request) *jsonrpc.Message {
	caps := offeredCapabilities(p.offerable(req.Profile), false)
	if tc := p.tasksCapability(req.Profile); tc != nil && tc["requests"] != nil {
		// A server's tasks of 2025-11-25 are bridged to the extension.
		ext, _ := caps["extensions"].(map[string]json.RawMessage)
		if _, ok := ext[TasksExtension]; !ok {
			ext = maps.Clone(ext)
			if ext == nil {
				ext = map[string]json.RawMessage{}
			}
			ext[TasksExtension] = json.RawMessage(`{}`)
			caps["extensions"] = ext
		}
	}
	body, _ := rawjson.Marshal(map[string]any{
		"supportedVersions": protocol.Versions,
		"capabilities":      caps,
	}) // its _meta names the aggregator, as every result's does

	return answer(body)
}

func (p *Proxy) toolsList(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	var params struct {
		Cursor string `json:"cursor"`
	}
	if len(req.Msg.Params) > 0 {
		_ = json.Unmarshal(req.Msg.Params, &params)
	}
	if params.Cursor != "" {
		return failure(jsonrpc.CodeInvalidParams, "invalid cursor %q: the tool list is sent whole, in one page", params.Cursor)
	}
	// A client that lists right after connecting should see the servers
	// that start promptly, not an empty catalog; slow ones arrive later
	// with tools/list_changed.
	p.awaitLoad(ctx)
	if req.Session != nil {
		p.clients.first.sawList(req.Session.Key())
	}
	st := p.current()
	if st.profileOf(req.Profile) == nil {
		if req.Session != nil {
			if ext := extensionServers(st, req.Profile); ext != nil {
				return answer(withExtensionTaskSupport(st, ext, st.toolsResult()))
			}
		}
		return answer(st.toolsResult())
	}
	tools := p.listed(st, listTools, req.Profile)
	body := make([]byte, 0, len(tools)+16)
	body = append(body, catalog.ToolsResultPrefix...)
	body = append(body, tools...)
	body = append(body, '}')
	if req.Session != nil {
		// A 2025-11-25 session's tasks run on a server of the tasks
		// extension too, bridged.
		body = withExtensionTaskSupport(st, extensionServers(st, req.Profile), body)
	}
	return answer(body)
}

// callParams are the members of tools/call params the dispatcher reads; the
// arguments, task and the _meta members it reads stay raw.
type callParams struct {
	Name string
	// Entry is the entry the catalog parseCallParams was given exports
	// under Name; nil when it exports none, or none was given.
	Entry     *catalog.Entry
	Arguments json.RawMessage
	Task      json.RawMessage // params.task: run as a task; nil when absent or null
	// Token and Lease are _meta's progressToken and LeaseMetaKey members,
	// raw; nil when absent.
	Token, Lease json.RawMessage
}

// parseCallParams reads tools/call params in one scan of the raw bytes (the
// message was validated as it was decoded): a string name, arguments of
// any kind, and _meta, an object or null, of which it keeps the members
// the dispatcher reads. Names match exactly; a repeated member counts with
// its last value. With cat, the name is looked up there (toolName).
func parseCallParams(raw json.RawMessage, cat *catalog.Catalog) (callParams, bool) {
	var (
		p          callParams
		name, meta []byte
	)
	obj := rawjson.NewObject(raw)
	for obj.Next() {
		switch string(obj.Name()) {
		case "name":
			name = obj.Value()
		case "arguments":
			p.Arguments = obj.Value()
		case "_meta":
			meta = obj.Value()
		case "task":
			p.Task = obj.Value()
		}
	}
	if obj.Err() != nil {
		return p, false
	}
	var ok bool
	if p.Name, p.Entry, ok = toolName(name, cat); !ok || p.Name == "" {
		return p, false
	}
	if string(p.Task) == "null" {
		p.Task = nil
	}
	if meta == nil || string(meta) == "null" {
		return p, true
	}
	members := rawjson.NewObject(meta)
	for members.Next() {
		switch string(members.Name()) {
		case "progressToken":
			p.Token = members.Value()
		case LeaseMetaKey:
			p.Lease = members.Value()
		}
	}
	return p, members.Err() == nil
}

// toolName is the string the JSON string tok holds, and the entry cat (nil:
// none) exports under it. A name written as it reads (no escapes, nothing
// outside printable ASCII) is looked up as it stands, and is the entry's
// own string when cat exports it: a call of an exported tool copies no
// name. ok is false when tok is no string.
func toolName(tok []byte, cat *catalog.Catalog) (name string, e *catalog.Entry, ok bool) {
	if cat != nil && len(tok) >= 2 && tok[0] == '"' && tok[len(tok)-1] == '"' && printable(tok[1:len(tok)-1]) {
		if e, found := cat.LookupBytes(tok[1 : len(tok)-1]); found {
			return e.Exported, e, true
		}
	}
	if name, ok = rawjson.String(tok); ok && cat != nil {
		e, _ = cat.Lookup(name)
	}
	return name, e, ok
}

// printable reports whether b is printable ASCII without a quote or a
// backslash: a JSON string's text that reads as it is written.
func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func (p *Proxy) toolsCall(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	st := p.current()
	params, ok := parseCallParams(req.Msg.Params, st.catalog)
	if !ok {
		return failure(jsonrpc.CodeInvalidParams, "tools/call needs params.name (a string) and optional params.arguments (an object)")
	}
	if params.Entry == nil && p.loading() {
		p.awaitLoad(ctx) // a call made right after connecting finds its tool
	}
	if bad := leaseNameError(req, params.Lease); bad != nil {
		return bad
	}
	var inv invocation
	inv.callOf(req, params, st)
	return response(p.send(ctx, &inv))
}

// callOf makes inv the tools/call req, whose params read as params under
// st's catalog.
func (inv *invocation) callOf(req *downstream.Request, params callParams, st *state) {
	*inv = invocation{method: "tools/call", name: params.Name, entry: params.Entry, entryIn: st.catalog,
		params: req.Msg.Params, args: params.Arguments, task: params.Task, req: req, token: params.Token}
	inv.key, inv.anonymous = leaseKeyOf(req, params.Lease)
}

// listen serves subscriptions/listen: an acknowledgement first, then the
// notifications the client asked for and the aggregator sends, on the
// request's own stream, until the client goes away or the server ends it.
func (p *Proxy) listen(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	var params struct {
		Notifications listenFilter `json:"notifications"`
	}
	if len(req.Msg.Params) > 0 {
		if err := json.Unmarshal(req.Msg.Params, &params); err != nil {
			return failure(jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications must be an object: %v", err)
		}
	}
	if n := len(params.Notifications.ResourceSubscriptions); n > maxSubscriptions {
		return failure(jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications.resourceSubscriptions names %d URIs, more than the %d one stream may; name fewer, or spread them over several streams", n, maxSubscriptions)
	}
	// The resources it names need their owners known, as reads do.
	if len(params.Notifications.ResourceSubscriptions) > 0 {
		p.awaitLoad(ctx)
	}
	if n := len(params.Notifications.TaskIDs); n > maxListenTasks {
		return failure(jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications.taskIds names %d tasks, more than the %d one stream may; name fewer, or spread them over several streams", n, maxListenTasks)
	}
	filter := p.granted(req.Profile, params.Notifications)
	filter.TaskIDs = p.grantedTasks(req, params.Notifications.TaskIDs)
	uris := filter.ResourceSubscriptions
	filter.ResourceSubscriptions = nil
	// The id is kept as long as the stream lasts: a copy of its own, not
	// a slice of the buffer the transport read the request into.
	l := &listener{id: append(json.RawMessage(nil), req.Msg.ID...), client: req.Profile, filter: filter, send: req.Send, end: make(chan struct{})}
	// Registered before the acknowledgement, so no change falls between
	// them; what arrives before the acknowledgement is sent after it.
	if p.closed.Load() {
		close(l.end)
	} else {
		p.clients.listen(l)
		defer p.clients.unlisten(l)
		// The resources it names are subscribed upstream before the
		// acknowledgement, which names those whose updates will come.
		kept, servers := p.listenSubscribe(ctx, req, l, uris)
		p.clients.subscribeListener(l, kept, servers)
		if len(servers) > 0 {
			defer p.listenUnsubscribe(ctx, req, l, servers)
		}
	}
	ack := &jsonrpc.Message{Method: "notifications/subscriptions/acknowledged",
		Params: subscriptionMeta(l.id, map[string]any{"notifications": p.clients.filterOf(l)})}
	if !l.acknowledge(ack) {
		return failure(jsonrpc.CodeInvalidRequest, "subscriptions/listen needs a stream: accept text/event-stream")
	}
	select {
	case <-ctx.Done():
		return nil
	case <-l.end:
	}
	return answer(subscriptionMeta(l.id, nil))
}

// granted is the part of a listen filter the aggregator can honour: as
// initialize offers, every list while the first load still runs.
func (p *Proxy) granted(client string, want listenFilter) listenFilter {
	c := p.offerable(client)
	got := listenFilter{ToolsListChanged: want.ToolsListChanged}
	got.PromptsListChanged = want.PromptsListChanged && c.Prompts
	got.ResourcesListChanged = want.ResourcesListChanged && c.Resources
	if c.Subscribe {
		got.ResourceSubscriptions = want.ResourceSubscriptions
	}
	return got
}

// errorObject renders a JSON-RPC error object of the aggregator's own.
func errorObject(code int, format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
