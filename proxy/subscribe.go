package proxy

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/naming"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Resource subscriptions are an upstream's, per upstream session: one
// resources/unsubscribe ends a URI's updates for everyone the instance
// serves. The aggregator subscribes an instance on behalf of every session
// and listen stream that asks, and unsubscribes it only when the last of
// them no longer does.

// subscriptionTimeout bounds each resources/subscribe or unsubscribe the
// aggregator sends of its own accord: when a listen stream or a session
// ends, and when a new instance takes over what clients subscribed to.
const subscriptionTimeout = 10 * time.Second

// heldByOther reports whether a session other than the one with key
// except is subscribed to uri on server.
func (t *sessions) heldByOther(except, server, uri string) bool {
	for _, s := range t.existing() {
		if s.key != except && s.subscribed(server, uri) {
			return true
		}
	}
	return false
}

// uris returns the URIs some session subscribed to on server.
func (t *sessions) uris(server string) []string {
	var out []string
	for _, s := range t.existing() {
		out = append(out, s.urisOn(server)...)
	}
	return out
}

// subscriptionHeld reports whether a session other than session, or a
// listen stream other than l, holds a subscription to uri on server.
func (p *Proxy) subscriptionHeld(server, uri, session string, l *listener) bool {
	return p.sessions.heldByOther(session, server, uri) || p.clients.listenerHolds(server, uri, l)
}

// subscriptionTurn waits for the turn (subscriptionOrder) of uri on
// server's shared instance, and returns the function that gives it back.
// A leased instance is one session's: its subscriptions need no turn.
func (p *Proxy) subscriptionTurn(ctx context.Context, server, uri string) (func(), error) {
	if rs := p.current().servers[server]; rs == nil || !rs.pool.Stateless() {
		return func() {}, nil
	}
	return p.subOrder.take(ctx, server, uri)
}

// subscriptionRequest is req, the subscriptions/listen request, turned
// into a resources/subscribe or resources/unsubscribe of uri: the same
// caller and lease, no other parameter.
func subscriptionRequest(req *downstream.Request, method, uri string) *downstream.Request {
	params := []byte(`{"uri":`)
	params = rawjson.AppendString(params, uri)
	if lease, ok := requestMeta(req.Msg.Params)[LeaseMetaKey]; ok {
		params = append(params, `,"_meta":{`...)
		params = rawjson.AppendString(params, LeaseMetaKey)
		params = append(params, ':')
		params = append(params, lease...)
		params = append(params, '}')
	}
	params = append(params, '}')
	sub := *req
	sub.Msg = &jsonrpc.Message{ID: req.Msg.ID, Method: method, Params: params}
	return &sub
}

// listenSubscribe subscribes, for the listen stream l that req opened, the
// owner of each URI of uris, and returns those it subscribed with their
// servers. A URI no server serves, or whose subscription its server
// refused, is left out: the acknowledgement names only what the stream
// will hear of. Each URI counts as l's from before it is sent, as a
// session's does.
func (p *Proxy) listenSubscribe(ctx context.Context, req *downstream.Request, l *listener, uris []string) ([]string, map[string]string) {
	if len(uris) == 0 {
		return nil, nil
	}
	kept := make([]string, 0, len(uris))
	servers := make(map[string]string, len(uris))
	for _, uri := range uris {
		// An app resource is held under its server's own URI, and
		// acknowledged under the exported one (down).
		down := uri
		if _, original, app := naming.AppOriginal(uri); app {
			uri = original
		}
		if _, dup := servers[uri]; dup {
			continue
		}
		surface := p.clientSurface(p.current(), req.Profile)
		server, ok := surface.ResourceOwner(down)
		if !ok && !naming.IsAppURI(down) {
			server, ok = surface.SoleServer(true)
		}
		if rs := p.current().servers[server]; !ok || rs == nil || !rs.caps.ResourcesSubscribe {
			continue
		}
		sub := subscriptionRequest(req, "resources/subscribe", uri)
		if !p.admits(req.Profile, server) {
			continue
		}
		release, err := p.subscriptionTurn(ctx, server, uri)
		if err != nil {
			break // the client went away
		}
		p.clients.holdListener(l, uri, server)
		if resp := p.forward(ctx, sub, server, sub.Msg.Params); resp == nil || resp.Error != nil {
			p.clients.dropListenerHold(l, uri)
			release()
			continue
		}
		release()
		kept = append(kept, down)
		servers[uri] = server
	}
	return kept, servers
}

// listenUnsubscribe ends the upstream subscriptions of a listen stream that
// ended, except those a session or another stream still holds.
func (p *Proxy) listenUnsubscribe(ctx context.Context, req *downstream.Request, l *listener, servers map[string]string) {
	for uri, server := range servers {
		if p.closed.Load() {
			return // the instances close with the aggregator
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscriptionTimeout)
		if release, err := p.subscriptionTurn(uctx, server, uri); err == nil {
			if !p.subscriptionHeld(server, uri, "", l) {
				sub := subscriptionRequest(req, "resources/unsubscribe", uri)
				p.forward(uctx, sub, server, sub.Msg.Params)
			}
			release()
		}
		cancel()
	}
}

// sessionUnsubscribe ends the upstream subscriptions held, server and URI
// pairs, of a session that ended without unsubscribing, except those
// another session or a listen stream still holds. A leased instance ends
// with its lease; a shared one would otherwise go on sending updates no
// one hears for as long as it runs. The unsubscribes go out off the
// caller's path, one server after the other on one goroutine (a session
// may hold maxSubscriptions), each bounded, and not at all once the
// aggregator closes.
func (p *Proxy) sessionUnsubscribe(held [][2]string) {
	byServer := map[string][]string{}
	var order []string
	for _, sub := range held {
		server, uri := sub[0], sub[1]
		if rs := p.current().servers[server]; rs == nil || !rs.pool.Stateless() {
			continue
		}
		if byServer[server] == nil {
			order = append(order, server)
		}
		byServer[server] = append(byServer[server], uri)
	}
	if len(order) == 0 {
		return
	}
	go func() {
		for _, server := range order {
			p.subscribeShared(server, "resources/unsubscribe", byServer[server])
		}
	}()
}

// resubscribe subscribes the shared instance of server, one that has just
// taken over (after a reload changed the server, a crash or a replacement),
// to every URI a session or a listen stream holds on server. Clients
// subscribed through the aggregator, not to one instance: without this
// their updates would stop without a word. It runs off the caller's path.
func (p *Proxy) resubscribe(server string) {
	uris := append(p.sessions.uris(server), p.clients.listenerURIs(server)...)
	if len(uris) == 0 {
		return
	}
	slices.Sort(uris)
	go p.subscribeShared(server, "resources/subscribe", slices.Compact(uris))
}

// subscribeShared sends method (resources/subscribe or unsubscribe) for
// each of uris to the shared instance of server, if it has one that takes
// subscriptions, each bounded, none once the aggregator closes. Each is
// decided in the URI's turn: a subscribe goes only while some session or
// listen stream holds the URI, an unsubscribe only while none does.
func (p *Proxy) subscribeShared(server, method string, uris []string) {
	rs := p.current().servers[server]
	if rs == nil || !rs.pool.Stateless() || !rs.caps.ResourcesSubscribe {
		return
	}
	for _, uri := range uris {
		if p.closed.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(p.life, subscriptionTimeout)
		release, err := p.subOrder.take(ctx, server, uri)
		if err != nil {
			cancel()
			continue
		}
		if p.subscriptionHeld(server, uri, "", nil) == (method == "resources/subscribe") {
			if !p.sendSubscription(ctx, rs, method, uri) {
				release()
				cancel()
				return // the instance is gone, and its subscriptions with it
			}
		}
		release()
		cancel()
	}
}

// sendSubscription sends method (resources/subscribe or unsubscribe) of
// uri to the shared instance of rs. It reports false when there is no
// instance to send it to.
func (p *Proxy) sendSubscription(ctx context.Context, rs *runningServer, method, uri string) bool {
	grant, err := rs.pool.Acquire(ctx, session.Key{})
	if err != nil {
		return false
	}
	defer grant.Done()
	p.subscribeInstance(ctx, rs, grant.Instance, method, uri)
	return true
}

// subscribeInstance sends method (resources/subscribe or unsubscribe) of
// uri to inst, an instance of rs, on the aggregator's own behalf: a
// failure is logged, and changes nothing clients hold.
func (p *Proxy) subscribeInstance(ctx context.Context, rs *runningServer, inst *upstream.Instance, method, uri string) {
	params := rawjson.AppendString([]byte(`{"uri":`), uri)
	if _, err := inst.Do(ctx, upstream.Request{Method: method, Params: append(params, '}')}); err != nil {
		p.log.Debug("a subscription the aggregator keeps for its clients failed upstream", "server", rs.cfg.ID, "method", method, "uri", uri, "err", p.scrub(rs.cfg, err.Error()))
	}
}

// followSubscriptions subscribes inst, the instance that req's session has
// just taken as its lease of rs (its first, or one that took over from an
// instance that died, was recycled or was replaced by a reload), to every
// URI the session holds on that server, before req reaches it. The session
// subscribed through the aggregator, not to one instance: without this its
// updates would stop without a word. The URI of req itself, when it is a
// resources/subscribe or unsubscribe, is left to req.
func (p *Proxy) followSubscriptions(rs *runningServer, inst *upstream.Instance, req *downstream.Request) {
	s := req.Session
	if s == nil || !rs.caps.ResourcesSubscribe {
		return
	}
	if own, ok := rs.pool.Leased(sessionLeaseKey(s)); !ok || own != inst {
		return // an instance leased under another key (a 2026-07-28 request's _meta)
	}
	uris := p.sessions.find(s).urisOn(rs.cfg.ID)
	if len(uris) == 0 {
		return
	}
	except := ""
	if m := req.Msg.Method; m == "resources/subscribe" || m == "resources/unsubscribe" {
		var params struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(req.Msg.Params, &params)
		except = params.URI
	}
	slices.Sort(uris)
	for _, uri := range uris {
		if uri == except {
			continue
		}
		if p.closed.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(p.life, subscriptionTimeout)
		p.subscribeInstance(ctx, rs, inst, "resources/subscribe", uri)
		cancel()
	}
}

// withSubscriptionID returns notification params whose _meta names id as
// the subscription it is delivered on, or, with id nil, names none: an
// upstream's own subscription id belongs to the aggregator's listen stream
// upstream, never to a client. Every other member keeps its bytes.
func withSubscriptionID(params json.RawMessage, id json.RawMessage) json.RawMessage {
	const key = downstream.MetaSubscriptionID
	meta := rawjson.Member(params, "_meta")
	switch {
	case meta == nil && id == nil:
		return params
	case meta == nil:
		return rawjson.Add(params, "_meta", append(append(append(rawjson.AppendString([]byte{'{'}, key), ':'), id...), '}'))
	case id == nil:
		// An upstream's own subscription id goes, and _meta with it when
		// that was all it held.
		return editMeta(params, func(m []byte) []byte { return rawjson.Without(m, key) })
	default:
		out, _ := rawjson.Replace(params, "_meta", func(old []byte) ([]byte, bool) {
			return rawjson.Set(old, key, func([]byte) []byte { return id })
		})
		return out
	}
}
