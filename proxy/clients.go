package proxy

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// clients are the downstream parties that hear about catalog changes:
// sessions (stdio, HTTP of the session-based generation), found in the
// registry of Sessions (session.go), and the listen streams of sessionless
// clients, kept here: mu guards the streams and what each subscribes to.
type clients struct {
	reg       *sessions
	mu        sync.Mutex
	listeners map[*listener]struct{}
	first     firstLoad // who hears of tool list changes during the first load
}

// offer is the part of the capabilities offered at a session's initialize
// that decides which notifications the session may be sent.
type offer struct {
	resources, subscribe, prompts bool
	// logging: the session may be sent log messages (notifications/message),
	// which only a server that declared logging may send.
	logging bool
}

// has reports whether the offer includes the list of kind ("tools",
// "resources", "prompts"); tools are always offered.
func (o offer) has(kind string) bool {
	switch kind {
	case "resources":
		return o.resources
	case "prompts":
		return o.prompts
	}
	return true
}

// pendingOfferTTL is how long the offer of a session that never registers
// (its initialize failed, or its client went away) is kept: far longer than
// an initialize takes to be answered.
const pendingOfferTTL = time.Minute

// listener is one subscriptions/listen stream.
type listener struct {
	id     json.RawMessage // the listen request's id: the subscription id
	client string          // the authenticated client that opened it
	filter listenFilter
	// servers maps each URI of filter.ResourceSubscriptions to the server
	// subscribed to it for this stream (guarded by the clients' lock).
	servers map[string]string
	send    func(*jsonrpc.Message) bool
	end     chan struct{} // closed when the server ends the subscription

	mu     sync.Mutex
	acked  bool
	missed []*jsonrpc.Message // notifications from before the acknowledgement
}

// acknowledge sends ack, then whatever was held back while it was not sent.
func (l *listener) acknowledge(ack *jsonrpc.Message) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.send(ack) {
		return false
	}
	l.acked = true
	for _, m := range l.missed {
		l.send(m)
	}
	l.missed = nil
	return true
}

// deliver sends m on the stream, after the acknowledgement.
func (l *listener) deliver(m *jsonrpc.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.acked {
		if len(l.missed) < 16 {
			l.missed = append(l.missed, m)
		}
		return
	}
	l.send(m)
}

// listenFilter is what a listen stream asked for, and was granted.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs are tasks of the tasks extension whose notifications/tasks
	// the stream gets: the listener's own (tasknotes.go).
	TaskIDs []string `json:"taskIds,omitempty"`
}

func (f listenFilter) wants(kind string) bool {
	switch kind {
	case "tools":
		return f.ToolsListChanged
	case "prompts":
		return f.PromptsListChanged
	case "resources":
		return f.ResourcesListChanged
	}
	return false
}

func (c *clients) init(reg *sessions) {
	c.reg = reg
	c.listeners = map[*listener]struct{}{}
}

func (c *clients) listen(l *listener) {
	c.mu.Lock()
	c.listeners[l] = struct{}{}
	c.mu.Unlock()
}

func (c *clients) unlisten(l *listener) {
	c.mu.Lock()
	delete(c.listeners, l)
	c.mu.Unlock()
}

// subscribeListener records the resources a listen stream is subscribed
// to, each with the server that serves it.
func (c *clients) subscribeListener(l *listener, uris []string, servers map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.filter.ResourceSubscriptions = uris
	l.servers = servers
}

// holdListener records that l subscribes to uri on server, from before the
// upstream is asked: the upstream may send the URI's first update at once.
func (c *clients) holdListener(l *listener, uri, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.servers == nil {
		l.servers = map[string]string{}
	}
	l.servers[uri] = server
}

// dropListenerHold undoes holdListener for a subscription the upstream refused.
func (c *clients) dropListenerHold(l *listener, uri string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(l.servers, uri)
}

// filterOf is what a listen stream was granted.
func (c *clients) filterOf(l *listener) listenFilter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return l.filter
}

// listenerHolds reports whether a registered listen stream other than
// except is subscribed to uri on server.
func (c *clients) listenerHolds(server, uri string, except *listener) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for l := range c.listeners {
		if l != except && l.servers[uri] == server && server != "" {
			return true
		}
	}
	return false
}

// listenerURIs returns the URIs registered listen streams are subscribed
// to on server.
func (c *clients) listenerURIs(server string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for l := range c.listeners {
		for uri, s := range l.servers {
			if s == server {
				out = append(out, uri)
			}
		}
	}
	return out
}

// endListeners ends every listen stream gracefully (shutdown).
func (c *clients) endListeners() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for l := range c.listeners {
		close(l.end)
		delete(c.listeners, l)
	}
}

// changed tells every session that was offered the list of kind ("tools",
// "resources", "prompts") at its initialize, and every listener that asked
// for it and was granted it, that the list changed. Delivery only
// queues (Notify and Send never block), so one slow client never delays
// the others.
func (c *clients) changed(kind string) { c.changedFor(kind, nil, nil) }

// changedFor is changed for the sessions and listeners of the clients
// affected reports true for (every one when affected is nil), told by the
// key of their profile (keyOf for a session). affected runs on the
// caller's goroutine, outside the lock.
func (c *clients) changedFor(kind string, keyOf func(downstream.Session) string, affected func(client string) bool) {
	method := "notifications/" + kind + "/list_changed"
	plain := &jsonrpc.Message{Method: method}
	var sessions []downstream.Session
	for _, s := range c.reg.live() {
		if kind == "tools" && !c.first.notifies(s.key) {
			continue
		}
		if !s.offered().has(kind) {
			continue // a capability the session was never offered
		}
		sessions = append(sessions, s.ds)
	}
	c.mu.Lock()
	var listeners []*listener
	for l := range c.listeners {
		if l.filter.wants(kind) {
			listeners = append(listeners, l)
		}
	}
	c.mu.Unlock()
	for _, s := range sessions {
		if affected == nil || affected(keyOf(s)) {
			s.Notify(plain)
		}
	}
	for _, l := range listeners {
		if affected == nil || affected(l.client) {
			l.deliver(&jsonrpc.Message{Method: method, Params: subscriptionMeta(l.id, nil)})
		}
	}
}

// subscriptionMeta renders params carrying the subscription id in _meta,
// plus the given members.
func subscriptionMeta(id json.RawMessage, members map[string]any) json.RawMessage {
	b := []byte(`{"_meta":{"` + downstream.MetaSubscriptionID + `":`)
	b = append(b, id...)
	b = append(b, '}')
	for k, v := range members {
		raw, _ := json.Marshal(v)
		b = append(b, ',')
		kq, _ := json.Marshal(k)
		b = append(b, kq...)
		b = append(b, ':')
		b = append(b, raw...)
	}
	return append(b, '}')
}

// changedIn tells the session with key, if it was offered the list of
// kind, that its list changed.
func (c *clients) changedIn(key session.Key, kind string) {
	if s := c.reg.lookup(key); s != nil && s.offered().has(kind) {
		s.ds.Notify(&jsonrpc.Message{Method: "notifications/" + kind + "/list_changed"})
	}
}

// byLeaseKey finds the registered session a lease key belongs to.
func (c *clients) byLeaseKey(leaseKey session.Key) *Session {
	return c.reg.lookup(leaseKey) // a conversation's is never registered
}

// resourceUpdated tells the listen streams subscribed to uri on server
// whose client admits reports true for, each under its own subscription
// id. admits runs under the clients' lock: it only reads.
func (c *clients) resourceUpdated(server, uri string, params json.RawMessage, admits func(client string) bool) {
	c.mu.Lock()
	var targets []*listener
	for l := range c.listeners {
		if l.servers[uri] == server && admits(l.client) {
			targets = append(targets, l)
		}
	}
	c.mu.Unlock()
	for _, l := range targets {
		l.deliver(&jsonrpc.Message{Method: "notifications/resources/updated", Params: withSubscriptionID(params, l.id)})
	}
}
