package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/resultcache"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The result cache holds what upstreams answer with the caching hints of
// 2026-07-28 (ttlMs, cacheScope) for as long as they say it stays fresh,
// and serves it in place of asking again. Of the methods that carry the
// hints only resources/read goes to an upstream per request: the lists
// clients see are the aggregator's own, rendered once per commit.
//
// Who may be served an entry:
//   - a public result of a shared instance: every caller of that instance;
//   - a private one: the principal that asked for it, alone;
//   - anything a leased instance answers: the lease (the session or
//     conversation holding it) and the principal that asked, alone.
//
// An entry belongs to the instance that answered, so a reload that
// changes the server, or an instance replaced, serves nothing it cached;
// the entries of an instance are dropped when it closes, those of a URI
// on its notifications/resources/updated, and all of its resources/ ones
// on its resources/list_changed.

// cacheSlot is where one request's result is looked up and kept: under
// shared when it says public, under own when it says private.
type cacheSlot struct {
	shared, own resultcache.Key
	inst        *upstream.Instance
	// asked is set when the upstream sent the caller a request of its own
	// (elicitation, sampling, roots) while answering, inputRequests of
	// 2026-07-28 included: the result then depends on the caller's answer,
	// which the key does not hold.
	asked atomic.Bool
}

// watch returns h, telling slot when the upstream asks the caller
// something. A nil slot (nothing to keep) leaves h as it is.
func (slot *cacheSlot) watch(h upstream.ServerRequestHandler) upstream.ServerRequestHandler {
	if slot == nil || h == nil {
		return h
	}
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		slot.asked.Store(true)
		return h(ctx, method, params)
	}
}

// leasePartition is the partition of everything a leased instance answers.
type leasePartition struct {
	key session.Key
	who identity.Principal
}

// cachedResult is the result the cache holds for inv, now on grant's
// instance, with its ttlMs set to what is left of it; ok is false when
// none is held or inv is not cacheable, and slot nil when the result inv
// gets is not to be kept either.
func (p *Proxy) cachedResult(inv *invocation, rs *runningServer, grant *session.Grant) (slot *cacheSlot, raw json.RawMessage, ok bool) {
	if grant == nil || inv.method != "resources/read" || inv.onTask != nil || len(inv.task) > 0 {
		return nil, nil, false
	}
	if rawjson.Has(inv.params, "inputResponses") || rawjson.Has(inv.params, "requestState") {
		return nil, nil, false // a retry's result depends on inputs the key does not hold
	}
	if !p.results.On() {
		return nil, nil, false
	}
	// _meta (a progress token, trace context, a lease key already in the
	// partition) does not change what a read returns.
	params := rawjson.Without(inv.params, "_meta")
	uri, _ := rawjson.String(rawjson.Member(params, "uri"))
	slot = &cacheSlot{inst: grant.Instance}
	slot.shared = resultcache.Key{Owner: grant.Instance, Method: inv.method, Subject: uri, Params: string(params)}
	slot.own = slot.shared
	who := principalOf(inv.req)
	if rs.pool.Stateless() {
		slot.own.Partition = who
	} else {
		slot.shared.Partition = leasePartition{key: inv.key, who: who}
		slot.own.Partition = slot.shared.Partition
	}
	now := time.Now()
	for _, k := range []resultcache.Key{slot.shared, slot.own} {
		if v, left, hit := p.results.Get(k, now); hit {
			p.results.Count(true)
			return slot, resultcache.WithTTL(v, left), true
		}
	}
	p.results.Count(false)
	return slot, nil, false
}

// keepResult keeps raw in slot if its hints say it may be, for as long as
// they say.
func (p *Proxy) keepResult(slot *cacheSlot, raw json.RawMessage) {
	if slot == nil || slot.asked.Load() {
		return
	}
	ttl, scope, ok := resultcache.Hints(raw)
	if !ok {
		return
	}
	k := slot.own
	if scope == resultcache.Public {
		k = slot.shared
	}
	// A copy: what goes on to the client is no longer the cache's concern.
	p.results.Put(k, bytes.Clone(raw), ttl, time.Now())
	// Stored first: an instance that closed meanwhile drops it at once.
	if _, watched := p.cachedFrom.LoadOrStore(slot.inst, struct{}{}); !watched {
		inst := slot.inst
		go func() {
			<-inst.Done()
			p.cachedFrom.Delete(inst)
			p.results.Drop(func(k resultcache.Key) bool { return k.Owner == inst })
		}()
	}
}

// forgetResource drops what inst answered for uri: it said the resource
// changed.
func (p *Proxy) forgetResource(inst *upstream.Instance, uri string) {
	p.results.Drop(func(k resultcache.Key) bool {
		return k.Owner == inst && k.Subject == uri && strings.HasPrefix(k.Method, "resources/")
	})
}

// forgetList drops what inst answered of a kind (tools, prompts,
// resources) whose list it said changed.
func (p *Proxy) forgetList(inst *upstream.Instance, kind string) {
	p.results.Drop(func(k resultcache.Key) bool {
		return k.Owner == inst && strings.HasPrefix(k.Method, kind+"/")
	})
}

// CacheStats are the result cache's counters and size, for the metrics.
func (p *Proxy) CacheStats() resultcache.Stats { return p.results.Stats() }
