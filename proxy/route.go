package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// codeResourceNotFound is MCP's error for a URI no server serves.
const codeResourceNotFound = -32002

// forward sends a request other than tools/call to one server, through
// the forwarder (send): to the instance that serves the caller's session,
// with the server's request timeout (progress restarts it), progress on
// the caller's stream, and the upstream's requests during it routed back to
// the caller. params go up byte for byte; the result comes back byte for
// byte. nil: the caller went away, and no response is due.
func (p *Proxy) forward(ctx context.Context, req *downstream.Request, server string, params json.RawMessage) *jsonrpc.Message {
	meta := requestMeta(params)
	if bad := leaseNameError(req, meta[LeaseMetaKey]); bad != nil {
		return bad
	}
	inv := invocation{method: req.Msg.Method, server: server, params: upstreamParams(params, meta), req: req}
	inv.key, inv.anonymous = LeaseKeyOf(req, meta)
	inv.token = meta["progressToken"]
	return response(p.send(ctx, &inv))
}

// response is the message that answers what send returned: nil when no
// response is due.
func response(result json.RawMessage, rpcErr *jsonrpc.Error, err error) *jsonrpc.Message {
	switch {
	case err != nil:
		return nil // cancelled by the client: no response is due
	case rpcErr != nil:
		return &jsonrpc.Message{Error: rpcErr}
	default:
		return answer(result)
	}
}

// requestMeta reads params._meta.
func requestMeta(params json.RawMessage) map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) > 0 {
		_ = json.Unmarshal(params, &p)
	}
	return p.Meta
}

// bindSession makes a leased instance's unattributed upstream requests go
// to the session of req, which holds it.
//
// An upstream may have asked for roots when it started, before any session
// held it (and been refused); when a session that has roots first takes
// the instance, the upstream hears that the roots changed, and asks again.
// The instance is subscribed to what the session subscribed to on the
// server before req reaches it.
//
// A sessionless request's leased instance is bound to its conversation's
// Session (key), which keeps the instance's own lists; its requests of the
// older generation have no session to go to.
//
// bound is the Session of req's downstream session when the call looked it
// up already (nil: it is looked up here).
func (p *Proxy) bindSession(rs *runningServer, grant *session.Grant, req *downstream.Request, key session.Key, bound *Session) {
	s := req.Session
	if rs.pool.Stateless() {
		return
	}
	if req.Sessionless() || s == nil {
		if conv, err := p.sessions.conversation(key); err == nil {
			p.sessions.bindOnly(conv, grant.Instance)
		}
		return
	}
	if bound == nil {
		bound = p.session(s)
	}
	if !p.sessions.bindOnly(bound, grant.Instance) {
		return
	}
	grant.Instance.SetServerRequestHandler(p.relatedTasks(p.sessionRequests(s), grant.Instance, s))
	if declares(s.ClientCapabilities(), "roots") {
		// In turn with the session's own roots notifications (upstreamNotes).
		p.notes.send(p.life, p.log, grant.Instance, "notifications/roots/list_changed")
	}
	p.followSubscriptions(rs, grant.Instance, req)
}

// capabilityOf names the client capability a server-to-client request needs.
func capabilityOf(method string) string {
	switch method {
	case "sampling/createMessage":
		return "sampling"
	case "elicitation/create":
		return "elicitation"
	case "roots/list":
		return "roots"
	}
	return ""
}

func declares(capabilities json.RawMessage, name string) bool {
	var caps map[string]json.RawMessage
	if json.Unmarshal(capabilities, &caps) != nil {
		return false
	}
	v, ok := caps[name]
	return ok && string(v) != "null" && string(v) != "false"
}

// urlMode reports whether elicitation/create params ask for URL mode.
func urlMode(params json.RawMessage) bool {
	var p struct {
		Mode string `json:"mode"`
	}
	return json.Unmarshal(params, &p) == nil && p.Mode == "url"
}

// ask relays a server-to-client request through send, after checking that
// the client declared the capability it needs.
func ask(ctx context.Context, capabilities json.RawMessage, send func(context.Context, string, json.RawMessage) (*jsonrpc.Message, error),
	method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	need := capabilityOf(method)
	if need == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "the aggregator does not relay %s to its clients", method)
	}
	if !declares(capabilities, need) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the client did not declare the %s capability; %s cannot be relayed to it", need, method)
	}
	if method == "elicitation/create" && urlMode(params) && !declaresURLElicitation(capabilities) {
		// elicitation: {} is form mode alone; a URL must be asked for.
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the client did not declare the elicitation.url capability; a URL-mode elicitation/create cannot be relayed to it")
	}
	if send == nil {
		return nil, jsonrpc.Errorf(codeInternal, "the client's request has no stream to carry %s", method)
	}
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	resp, err := send(ctx, method, params)
	switch {
	case err != nil:
		return nil, jsonrpc.Errorf(codeInternal, "%s: the client did not answer: %v", method, err)
	case resp.Error != nil:
		return nil, resp.Error
	default:
		return resp.Result, nil
	}
}

// serverRequestTimeout bounds how long the aggregator waits for a client to
// answer an upstream's request (a person may be answering an elicitation).
const serverRequestTimeout = 10 * time.Minute

// serverRequests answers an upstream's requests made during req.
func (p *Proxy) serverRequests(req *downstream.Request) upstream.ServerRequestHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		send := req.Ask
		if send == nil && req.Session != nil {
			send = req.Session.Request
		}
		return ask(ctx, req.ClientCapabilities, send, method, params)
	}
}

// sessionRequests answers a leased instance's requests made outside any call.
func (p *Proxy) sessionRequests(s downstream.Session) upstream.ServerRequestHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return ask(ctx, s.ClientCapabilities(), s.Request, method, params)
	}
}

func (p *Proxy) resourcesList(ctx context.Context, req *downstream.Request, key string) *jsonrpc.Message {
	if c := cursorOf(req.Msg.Params); c != "" {
		return failure(jsonrpc.CodeInvalidParams, "invalid cursor %q: the list is sent whole, in one page", c)
	}
	p.awaitLoad(ctx)
	return answer(p.surfaceFor(p.current(), req.Profile, req).Result(key))
}

func cursorOf(params json.RawMessage) string {
	var c struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 {
		_ = json.Unmarshal(params, &c)
	}
	return c.Cursor
}

// resourceRequest routes resources/read, subscribe and unsubscribe by URI.
func (p *Proxy) resourceRequest(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	var params struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(req.Msg.Params, &params); err != nil || params.URI == "" {
		return failure(jsonrpc.CodeInvalidParams, "%s needs params.uri", req.Msg.Method)
	}
	p.awaitLoad(ctx)
	st := p.current()
	surface := p.surfaceFor(st, req.Profile, req)
	server, ok := surface.ResourceOwner(params.URI)
	if !ok && !naming.IsAppURI(params.URI) { // an app resource is named by its server alone
		server, ok = surface.SoleServer(req.Msg.Method != "resources/read")
	}
	if !ok || !st.profileOf(req.Profile).server(server) {
		p.noteHidden(req, st, hiddenResource, params.URI, (*catalog.Surface).ResourceOwner)
		why := "and more than one server offers resources"
		offers := surface.Offers()
		switch {
		case len(offers.ResourceServers) == 0:
			why = "and no server offers resources"
		case req.Msg.Method != "resources/read" && len(offers.SubscribeServers) == 0:
			why = "and no server offers resource subscriptions"
		case req.Msg.Method != "resources/read" && len(offers.SubscribeServers) > 1:
			why = "and more than one server offers resource subscriptions"
		}
		code := codeResourceNotFound
		if protocol.Modern(req.Protocol) {
			code = jsonrpc.CodeInvalidParams // 2026-07-28 has no -32002: an unknown URI is an invalid param
		}
		return &jsonrpc.Message{Error: &jsonrpc.Error{Code: code,
			Message: fmt.Sprintf("resource %q: no server lists it or has a template that matches it, %s; call resources/list and resources/templates/list", params.URI, why),
			Data:    mustJSON(map[string]string{"uri": params.URI})}}
	}
	// An app resource goes up, and is subscribed to, under its server's own URI.
	upParams, app := appUpstream(server, params.URI, req.Msg.Params)
	if app {
		_, params.URI, _ = naming.AppOriginal(params.URI)
	}
	if req.Msg.Method != "resources/read" {
		// Whether a shared instance is to hold the URI is decided, and the
		// upstream told, one request at a time.
		release, err := p.subscriptionTurn(ctx, server, params.URI)
		if err != nil {
			return nil // the caller went away
		}
		defer release()
	}
	if req.Msg.Method == "resources/unsubscribe" && req.Session != nil && p.sharedSubscription(server, params.URI, req.Session) {
		// The shared instance goes on sending the updates others still
		// subscribe to; this session no longer hears of them.
		p.sessions.find(req.Session).unsubscribe(server, params.URI)
		return answer([]byte(`{}`))
	}
	// A subscription counts from before it is sent: an upstream may send
	// the URI's first update right after its answer, before the answer is
	// read. A refused one is forgotten again, unless it was held already.
	subscribing := req.Msg.Method == "resources/subscribe" && req.Session != nil
	held := false
	if subscribing {
		var room bool
		if held, room = p.session(req.Session).subscribe(server, params.URI); !room {
			return failure(codeInternal, "resources/subscribe %q: this session holds %d resource subscriptions, the most it may; unsubscribe (resources/unsubscribe) from those it no longer needs first",
				params.URI, maxSubscriptions)
		}
	}
	resp := p.forward(ctx, req, server, upParams)
	if app {
		resp = appContents(server, resp)
	}
	done := resp != nil && resp.Error == nil
	switch {
	case subscribing && !done && !held:
		p.sessions.find(req.Session).unsubscribe(server, params.URI)
	case req.Msg.Method == "resources/unsubscribe" && done && req.Session != nil:
		p.sessions.find(req.Session).unsubscribe(server, params.URI)
	}
	return resp
}

// sharedSubscription reports whether session's subscription to uri on
// server is one of several on the same instance: the server's instance is
// shared, and another session or a listen stream subscribes to uri too.
func (p *Proxy) sharedSubscription(server, uri string, s downstream.Session) bool {
	rs := p.current().servers[server]
	return rs != nil && rs.pool.Stateless() && p.sessions.find(s).subscribed(server, uri) && p.subscriptionHeld(server, uri, s.Key(), nil)
}

// promptsGet routes prompts/get by exported name, sent upstream under the
// original.
func (p *Proxy) promptsGet(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	var params struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Msg.Params, &params); err != nil || params.Name == "" {
		return failure(jsonrpc.CodeInvalidParams, "prompts/get needs params.name")
	}
	p.awaitLoad(ctx)
	st := p.current()
	e, ok := p.surfaceFor(st, req.Profile, req).Prompt(params.Name)
	if !ok || !st.profileOf(req.Profile).server(e.Server) {
		p.noteHidden(req, st, hiddenPrompt, params.Name, (*catalog.Surface).PromptOwner)
		return failure(jsonrpc.CodeInvalidParams, "unknown prompt %q: no server exports it; call prompts/list for the current names", params.Name)
	}
	out, err := catalog.Renamed(req.Msg.Params, e.Original)
	if err != nil {
		return failure(jsonrpc.CodeInvalidParams, "prompts/get: %v", err)
	}
	return p.forward(ctx, req, e.Server, out)
}

// complete routes completion/complete by its ref: a prompt by exported name
// (sent upstream under the original), a resource template to its owner.
func (p *Proxy) complete(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	var params struct {
		Ref json.RawMessage `json:"ref"`
	}
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if json.Unmarshal(req.Msg.Params, &params) != nil || json.Unmarshal(params.Ref, &ref) != nil {
		return failure(jsonrpc.CodeInvalidParams, "completion/complete needs params.ref")
	}
	p.awaitLoad(ctx)
	st := p.current()
	s := p.surfaceFor(st, req.Profile, req)
	switch ref.Type {
	case "ref/prompt":
		e, ok := s.Prompt(ref.Name)
		if !ok || !st.profileOf(req.Profile).server(e.Server) {
			p.noteHidden(req, st, hiddenPrompt, ref.Name, (*catalog.Surface).PromptOwner)
			return failure(jsonrpc.CodeInvalidParams, "completion/complete: unknown prompt %q", ref.Name)
		}
		newRef, err := catalog.Renamed(params.Ref, e.Original)
		if err != nil {
			return failure(jsonrpc.CodeInvalidParams, "completion/complete: %v", err)
		}
		out, err := replaced(req.Msg.Params, "ref", newRef)
		if err != nil {
			return failure(jsonrpc.CodeInvalidParams, "completion/complete: %v", err)
		}
		return p.forward(ctx, req, e.Server, out)
	case "ref/resource":
		server, ok := s.TemplateOwner(ref.URI)
		if !ok {
			server, ok = s.ResourceOwner(ref.URI)
		}
		if !ok || !st.profileOf(req.Profile).server(server) {
			p.noteHidden(req, st, hiddenTemplate, ref.URI, (*catalog.Surface).TemplateOwner, (*catalog.Surface).ResourceOwner)
			return failure(jsonrpc.CodeInvalidParams, "completion/complete: no server lists resource template %q", ref.URI)
		}
		if newRef, app := appUpstream(server, ref.URI, params.Ref); app {
			// An app template goes up under the server's own URI.
			out, err := replaced(req.Msg.Params, "ref", newRef)
			if err != nil {
				return failure(jsonrpc.CodeInvalidParams, "completion/complete: %v", err)
			}
			return p.forward(ctx, req, server, out)
		}
		return p.forward(ctx, req, server, req.Msg.Params)
	default:
		return failure(jsonrpc.CodeInvalidParams, "completion/complete: ref.type %q is neither ref/prompt nor ref/resource", ref.Type)
	}
}

// replaced returns obj with its top-level member name's value replaced.
func replaced(obj json.RawMessage, name string, value json.RawMessage) (json.RawMessage, error) {
	out, ok := rawjson.Replace(obj, name, func([]byte) ([]byte, bool) { return value, true })
	if !ok {
		return nil, fmt.Errorf("not a JSON object with a member %q", name)
	}
	return out, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
