package proxy

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Session is the aggregator's side of one downstream session (a stdio
// connection, an HTTP session), or of one conversation of sessionless
// (2026-07-28) requests: a principal and the lease name its requests give
// (LeaseKeyOf). Everything the aggregator keeps for it alone lives here,
// and ends with one Close. It holds
//
//   - what the session was offered at its initialize (which notifications
//     it may be sent);
//   - the log level it set with logging/setLevel;
//   - its resource subscriptions, by server and URI;
//   - the leased instances bound to it (whose unattributed upstream
//     requests go to it), with the lists each gave of its own after a
//     list_changed (leasedlists.go);
//   - its tasks (tasks), which the task table indexes too, by id and by
//     upstream, for what spans sessions: the overall cap, the per-client
//     shares, and an upstream's notifications about a task.
//
// The instances themselves are the pools' (session.Key names the lease);
// Close ends the session's leases there. A conversation has no offer, log
// level or subscriptions (its requests carry them); its Session is made by
// its first lease or task, and closed when its last lease ends in the
// pools (leaseEnded), or forgotten once it holds nothing.
//
// Concurrency: mu guards every field below it. It is a leaf lock: nothing
// is called, and nothing is sent, while it is held. The registry's lock
// (sessions.mu) may be taken before a Session's, never after. tasks is
// guarded by the task table's mu, not by mu.
type Session struct {
	p     *Proxy
	lease session.Key        // its key in the registry: sessionLeaseKey(ds), or the conversation's
	key   string             // the downstream session's Key, never reused; "" for a conversation
	ds    downstream.Session // nil for a conversation
	tasks tasks.Owner        // guarded by Proxy.tasks.mu

	mu         sync.Mutex
	registered bool      // SessionOpened came, and Close did not yet
	closed     bool      // Close came: nothing more is recorded
	since      time.Time // when first used, to forget one never registered
	offer      offer
	level      int // logging/setLevel's, when levelSet
	levelSet   bool
	subs       map[string]bool                  // server+"\x00"+uri
	leased     map[*upstream.Instance]*ownLists // bound leased instances; their own lists, nil until a list_changed

	// owner is the leaseOwner of its latest leased call (leaseOwner).
	owner atomic.Pointer[leaseOwner]
}

// leaseOwner is ownerOf(req), for a lease of s: the one its latest leased
// call made when req's is the same, so that a session's calls make one
// only when who calls changes.
func (s *Session) leaseOwner(req *downstream.Request) *leaseOwner {
	if o := s.owner.Load(); o != nil && o.is(req) {
		return o
	}
	o := ownerOf(req)
	s.owner.Store(&o)
	return &o
}

// Downstream is the transport's session.
func (s *Session) Downstream() downstream.Session { return s.ds }

// offered is what the session was offered at its initialize; nothing
// beyond tools when it never initialized.
func (s *Session) offered() offer {
	if s == nil {
		return offer{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offer
}

func (s *Session) setOffer(o offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offer = o
}

// logLevel is the level the session set, or defaultLogLevel.
func (s *Session) logLevel() int {
	if s == nil {
		return defaultLogLevel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.levelSet {
		return defaultLogLevel
	}
	return s.level
}

func (s *Session) setLevel(level int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.level, s.levelSet = level, true
	}
}

// subscribe records the session's subscription to uri on server. It
// reports whether the session held it already, and whether there was room
// for it: a new one beyond maxSubscriptions is not recorded, nor one made
// after Close.
func (s *Session) subscribe(server, uri string) (held, room bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := server + "\x00" + uri
	if s.subs[k] {
		return true, true
	}
	if s.closed || len(s.subs) >= maxSubscriptions {
		return false, false
	}
	if s.subs == nil {
		s.subs = map[string]bool{}
	}
	s.subs[k] = true
	return false, true
}

func (s *Session) unsubscribe(server, uri string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, server+"\x00"+uri)
}

func (s *Session) subscribed(server, uri string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[server+"\x00"+uri]
}

// urisOn returns the URIs the session subscribed to on server.
func (s *Session) urisOn(server string) []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.subs {
		if id, uri, _ := strings.Cut(k, "\x00"); id == server {
			out = append(out, uri)
		}
	}
	return out
}

// bind records inst as a leased instance of the session's, until inst
// ends. It reports whether inst was not bound to it yet; nothing is bound
// after Close.
func (s *Session) bind(inst *upstream.Instance) (fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if _, ok := s.leased[inst]; ok {
		return false
	}
	if s.leased == nil {
		s.leased = map[*upstream.Instance]*ownLists{}
	}
	s.leased[inst] = nil
	go func() { <-inst.Done(); s.unbind(inst) }()
	return true
}

// unbind forgets inst (it ended).
func (s *Session) unbind(inst *upstream.Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leased, inst)
}

// keepOwn stores what the bound instance inst lists of its own, edited by
// edit from what it listed before. It reports false when inst is not bound
// to the session.
func (s *Session) keepOwn(inst *upstream.Instance, edit func(*ownLists) *ownLists) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.leased[inst]
	if !ok {
		return false
	}
	s.leased[inst] = edit(prev)
	return true
}

// ownLists returns the lists of the session's bound instances that gave
// their own.
func (s *Session) ownLists() map[*upstream.Instance]*ownLists {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[*upstream.Instance]*ownLists
	for inst, own := range s.leased {
		if own == nil {
			continue
		}
		if out == nil {
			out = map[*upstream.Instance]*ownLists{}
		}
		out[inst] = own
	}
	return out
}

// end marks the session closed and takes what it held: its subscriptions,
// as server and URI pairs. Everything else it held is dropped.
func (s *Session) end() (held [][2]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.registered = true, false
	held = make([][2]string, 0, len(s.subs))
	for k := range s.subs {
		server, uri, _ := strings.Cut(k, "\x00")
		held = append(held, [2]string{server, uri})
	}
	s.subs, s.leased, s.levelSet, s.offer = nil, nil, false, offer{}
	return held
}

// taskOwner is what the session owns of the task table; nil for nil.
func (s *Session) taskOwner() *tasks.Owner {
	if s == nil {
		return nil
	}
	return &s.tasks
}

// idle reports whether a session never registered holds nothing but the
// offer of an initialize that never completed, from longer than
// pendingOfferTTL ago. Conversations are never idle this way (see
// sessions.conversation).
func (s *Session) idle(now time.Time) bool {
	if s.ds == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.registered && len(s.subs) == 0 && len(s.leased) == 0 && !s.levelSet && now.Sub(s.since) > pendingOfferTTL
}

// sessions is the registry of Sessions by their session.Key: downstream
// sessions under sessionLeaseKey, conversations of sessionless requests
// under their lease key. A downstream session's Session is made on its
// first use (its initialize, or any request of a connection that never
// initializes) and removed by Close; a conversation's by its first lease
// or task (conversation), and removed when its leases end (leaseEnded) or
// once it holds nothing.
type sessions struct {
	p  *Proxy
	mu sync.Mutex
	by map[session.Key]*Session
	// conversations counts the conversations' Sessions per principal's
	// space (session.Key.Client), for maxConversations.
	conversations map[identity.Principal]int
}

// maxConversations bounds the conversations of sessionless requests one
// principal holds Sessions for at a time: each names its own under
// LeaseMetaKey, and they are untrusted input.
const maxConversations = 1000

// of returns ds's Session, made on first use; nil for nil.
func (t *sessions) of(ds downstream.Session) *Session {
	if ds == nil {
		return nil
	}
	key := sessionLeaseKey(ds)
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.by[key]; s != nil && s.ds == ds {
		return s
	}
	now := time.Now()
	for k, s := range t.by {
		if s.idle(now) {
			delete(t.by, k) // an initialize that never completed
		}
	}
	if t.by == nil {
		t.by = map[session.Key]*Session{}
	}
	s := t.made(ds, now)
	t.by[key] = s
	return s
}

// conversation returns the Session of the sessionless conversation key,
// made on first use. Making one beyond maxConversations of key's principal
// first forgets those that hold nothing (no lease in any pool, no task);
// when none does, it is refused, with an error naming the limit.
func (t *sessions) conversation(key session.Key) (*Session, error) {
	t.mu.Lock()
	if s := t.by[key]; s != nil {
		t.mu.Unlock()
		return s, nil
	}
	full := t.conversations[key.Client] >= maxConversations
	t.mu.Unlock()
	if full {
		t.forgetEmpty(key.Client)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.by[key]; s != nil {
		return s, nil
	}
	if t.conversations[key.Client] >= maxConversations {
		return nil, fmt.Errorf("this client holds leases or tasks in %d conversations of sessionless requests (distinct _meta[%q] names), the most the aggregator keeps for one client; reuse a conversation's name, release leases it no longer needs, or wait until idle ones expire (lease.idle_ttl)",
			maxConversations, LeaseMetaKey)
	}
	if t.by == nil {
		t.by = map[session.Key]*Session{}
	}
	if t.conversations == nil {
		t.conversations = map[identity.Principal]int{}
	}
	s := &Session{p: t.p, lease: key, since: time.Now(), tasks: tasks.Owner{Key: key}}
	t.by[key] = s
	t.conversations[key.Client]++
	return s, nil
}

// findConversation returns the Session of the conversation key, or nil.
func (t *sessions) findConversation(key session.Key) *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.by[key]; s != nil && s.ds == nil {
		return s
	}
	return nil
}

// takeConversation removes s, a conversation's Session, from the
// registry; false when it is not there (any more).
func (t *sessions) takeConversation(s *Session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by[s.lease] != s {
		return false
	}
	delete(t.by, s.lease)
	if t.conversations[s.lease.Client]--; t.conversations[s.lease.Client] <= 0 {
		delete(t.conversations, s.lease.Client)
	}
	return true
}

// forgetEmpty forgets the conversations of client's space that hold
// nothing: no lease in any pool, no live task. They held nothing to end.
func (t *sessions) forgetEmpty(client identity.Principal) {
	t.mu.Lock()
	var mine []*Session
	for k, s := range t.by {
		if s.ds == nil && k.Client == client {
			mine = append(mine, s)
		}
	}
	t.mu.Unlock()
	for _, s := range mine {
		if !t.p.conversationHolds(s, true) && t.takeConversation(s) {
			s.Close()
		}
	}
}

// find returns ds's Session, or nil when it has none (it never made a
// request that keeps anything, or it ended). A Session's readers (offered,
// logLevel, subscribed, urisOn, ownLists) take nil as one that holds
// nothing, so that reading never makes one.
func (t *sessions) find(ds downstream.Session) *Session {
	if ds == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.by[sessionLeaseKey(ds)]; s != nil && s.ds == ds {
		return s
	}
	return nil
}

// lookup returns the registered Session with key, or nil; a conversation's
// Session is never registered.
func (t *sessions) lookup(key session.Key) *Session {
	t.mu.Lock()
	s := t.by[key]
	t.mu.Unlock()
	if s == nil || !s.isRegistered() {
		return nil
	}
	return s
}

func (s *Session) isRegistered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered
}

// open registers ds's session: it is now sent notifications.
func (t *sessions) open(ds downstream.Session) {
	s := t.of(ds)
	s.mu.Lock()
	if !s.closed {
		s.registered = true
	}
	s.mu.Unlock()
}

func (t *sessions) made(ds downstream.Session, now time.Time) *Session {
	key := sessionLeaseKey(ds)
	return &Session{p: t.p, lease: key, key: ds.Key(), ds: ds, since: now, tasks: tasks.Owner{Key: key}}
}

// take removes ds's Session from the registry and returns it; for a
// session that kept nothing, an empty Session that is in no registry, so
// that its Close still ends what the pools hold for it.
func (t *sessions) take(ds downstream.Session) *Session {
	key := sessionLeaseKey(ds)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.by[key]
	if s == nil || s.ds != ds {
		return t.made(ds, time.Now())
	}
	delete(t.by, key)
	return s
}

// alive reports whether ds is a registered session.
func (t *sessions) alive(ds downstream.Session) bool {
	s := t.lookup(sessionLeaseKey(ds))
	return s != nil && s.ds == ds
}

// aliveAs is alive, read from s when it is ds's Session (the caller looked
// it up already), with no lookup of ds's key: a Session leaves the
// registry only as it ends (take, then end), or never registered.
func (t *sessions) aliveAs(s *Session, ds downstream.Session) bool {
	if s == nil || s.ds != ds {
		return t.alive(ds)
	}
	return s.isRegistered()
}

// live lists the registered Sessions.
func (t *sessions) live() []*Session {
	t.mu.Lock()
	all := make([]*Session, 0, len(t.by))
	for _, s := range t.by {
		all = append(all, s)
	}
	t.mu.Unlock()
	out := all[:0]
	for _, s := range all {
		if s.isRegistered() {
			out = append(out, s)
		}
	}
	return out
}

// boundTo returns the Session inst is bound to (bindSession), or nil.
func (t *sessions) boundTo(inst *upstream.Instance) *Session {
	for _, s := range t.existing() {
		if s.holds(inst) {
			return s
		}
	}
	return nil
}

// bindOnly binds inst to s and unbinds it from every other Session (a
// lease handed on): its unattributed requests go to one session. It
// reports whether inst was not bound to s yet.
func (t *sessions) bindOnly(s *Session, inst *upstream.Instance) bool {
	if !s.bind(inst) {
		return false
	}
	for _, other := range t.existing() {
		if other != s {
			other.unbind(inst)
		}
	}
	return true
}

func (s *Session) holds(inst *upstream.Instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.leased[inst]
	return ok
}

// existing lists every Session, registered or not.
func (t *sessions) existing() []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Session, 0, len(t.by))
	for _, s := range t.by {
		out = append(out, s)
	}
	return out
}

// session returns ds's Session, made on first use; nil for nil. Only what
// records something for the session makes one; readers use sessions.find.
func (p *Proxy) session(ds downstream.Session) *Session { return p.sessions.of(ds) }

// Close ends the session, once it is out of the registry (sessions.take):
// it leaves the notification fan-out, its offer, log level and bound
// instances are dropped, its tasks are forgotten (those on shared
// instances cancelled there), its leases end, and its upstream resource
// subscriptions no one else holds are ended. It runs on the transport's
// goroutine, so nothing here writes upstream on it: the task cancels and
// unsubscribes go out on goroutines of their own, each bounded, and the
// pools retire the leased instances off it.
//
// A conversation's Session is closed once its leases ended in the pools
// (leaseEnded): it holds no subscriptions, and has no lease left to end.
func (s *Session) Close() {
	p := s.p
	held := s.end()
	p.tasksEnded(&s.tasks)
	if s.ds == nil {
		return
	}
	p.clients.first.forget(s.key)
	p.sessionEnded(s.lease)
	p.sessionUnsubscribe(held)
}

// requestSession is the Session of req's caller, made on first use: its
// downstream session's, or for a sessionless request the one of its
// conversation (key, its lease key), within the per-principal bound of
// maxConversations. nil, with no error, for a call made by no request.
func (p *Proxy) requestSession(req *downstream.Request, key session.Key) (*Session, error) {
	switch {
	case req == nil:
		return nil, nil
	case req.Sessionless() || req.Session == nil:
		return p.sessions.conversation(key)
	}
	return p.session(req.Session), nil
}

// findRequestSession is requestSession for readers: nil when there is none.
func (p *Proxy) findRequestSession(req *downstream.Request, key session.Key) *Session {
	switch {
	case req == nil:
		return nil
	case req.Sessionless() || req.Session == nil:
		return p.sessions.findConversation(key)
	}
	return p.sessions.find(req.Session)
}

// conversationHolds reports whether conversation s still holds something:
// a lease in a pool, or (with tasks) a live task or a call that may create
// one.
func (p *Proxy) conversationHolds(s *Session, withTasks bool) bool {
	for _, rs := range p.current().servers {
		if _, ok := rs.pool.Held(s.lease); ok {
			return true
		}
	}
	return withTasks && p.tasks.Live(&s.tasks, func(e *tasks.Entry) bool { return !instanceDone(e.Inst) })
}

// leaseEnded is told that key's lease of a server ended (expired, released,
// revoked, reclaimed): when key is a conversation's and it holds no other
// lease, its Session ends, and its tasks with it, unless one of them runs
// on an instance that goes on (a shared one): the Session then stays until
// they expire, and is forgotten once it holds nothing.
func (p *Proxy) leaseEnded(key session.Key) {
	if key.Kind != session.KeyNamed && key.Kind != session.KeyAnonymous {
		return
	}
	s := p.sessions.findConversation(key)
	if s == nil || p.conversationHolds(s, false) {
		return
	}
	if p.tasks.Live(&s.tasks, func(e *tasks.Entry) bool { return !instanceDone(e.Inst) && !p.leasedBy(e, key) }) {
		return
	}
	if p.sessions.takeConversation(s) {
		s.Close()
	}
}

// leasedBy reports whether task e runs on an instance leased to key: such
// an instance ends with the lease, and the task with it.
func (p *Proxy) leasedBy(e *tasks.Entry, key session.Key) bool {
	rs := p.current().servers[e.Server]
	return rs != nil && !rs.pool.Stateless() && e.Lease == key
}
