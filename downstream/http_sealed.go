package downstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sealed"
)

// DefaultSessionMaxAge is how long a sealed session id opens after its
// initialize unless HTTPOptions.SessionMaxAge says otherwise.
const DefaultSessionMaxAge = 24 * time.Hour

// MaxSessionIDLen bounds an Mcp-Session-Id this transport issues or
// looks up: a longer id names no session.
const MaxSessionIDLen = maxIDPrefix + 1 + sealed.MaxTokenLen

// maxIDPrefix is the longest SessionIDPrefix (ValidSessionIDPrefix).
const maxIDPrefix = 32

// sealedState is what a sealed session id carries: the session's state
// that any replica holding the key can take up. Field names are short, as
// they travel in every request's header.
type sealedState struct {
	Version string          `json:"v"`           // negotiated at initialize
	Caps    json.RawMessage `json:"c,omitempty"` // the client's capabilities, raw
	Info    json.RawMessage `json:"i,omitempty"` // the client's clientInfo, raw
	Kind    identity.Kind   `json:"pk"`          // the principal
	Name    string          `json:"pn,omitempty"`
	Issuer  string          `json:"pi,omitempty"` // an OAuth subject's issuer
	Subject string          `json:"ps,omitempty"` // and subject
	View    string          `json:"w,omitempty"`  // the view it was opened at
	Level   string          `json:"l,omitempty"`  // the log level set by logging/setLevel
	Replica string          `json:"r,omitempty"`  // the replica that opened the session
	Expires int64           `json:"e"`            // Unix seconds: the id opens no more after
}

// sealID gives s an id carrying its portable state, sealed under the ring
// in force, when a ring is set and the state fits; otherwise s keeps its
// random id, which only this replica knows.
func (t *HTTP) sealID(s *httpSession, version string, info json.RawMessage) {
	if t.opts.SessionKeys == nil {
		return
	}
	ring := t.opts.SessionKeys.Ring()
	if ring == nil {
		return
	}
	st := sealedState{Version: version, Caps: s.caps, Info: info, Kind: s.principal.Kind, Name: s.principal.Name,
		Issuer: s.principal.Issuer, Subject: s.principal.Subject, View: s.view,
		Replica: t.opts.Replica, Expires: time.Now().Add(t.opts.SessionMaxAge).Unix()}
	plain, _ := rawjson.Marshal(st)
	if len(plain) > sealed.MaxPlaintext { // a huge clientInfo travels no further than this replica
		st.Info = nil
		plain, _ = rawjson.Marshal(st)
	}
	token, err := ring.Seal(t.opts.SessionIDPrefix, plain)
	if err != nil {
		t.log.Warn("issued a session id that only this replica can serve: the client's capabilities do not fit a sealed id", "bytes", len(plain), "max", sealed.MaxPlaintext)
		return
	}
	s.id = t.opts.SessionIDPrefix + "." + token
	s.expires = time.Unix(st.Expires, 0)
	s.sealedInfo = st.Info
}

// negotiatedVersion is the version the aggregator answers an initialize
// asking for requested with: the client's when the session generation
// has it, else the newest.
func negotiatedVersion(requested string) string {
	if !protocol.Supported(requested) || protocol.Modern(requested) {
		return protocol.LatestSession
	}
	return requested
}

// openID opens a sealed session id; ok is false for every id that is not
// one this replica's keys sealed and that has not expired.
func (t *HTTP) openID(id string) (st sealedState, ok bool) {
	if t.opts.SessionKeys == nil || len(id) > MaxSessionIDLen {
		return st, false
	}
	ring := t.opts.SessionKeys.Ring()
	dot := strings.LastIndexByte(id, '.')
	if ring == nil || dot < 0 {
		return st, false
	}
	plain, err := ring.Open(id[:dot], id[dot+1:])
	if err != nil || json.Unmarshal(plain, &st) != nil || st.Version == "" {
		return st, false
	}
	return st, time.Now().Before(time.Unix(st.Expires, 0))
}

// resume takes up, on this replica, the session a sealed id names that
// another replica opened (or this one, before a restart): it is registered
// under the same id with the state the id carries, and the Handler hears
// the initialize again, as the client sent it, so that the session is
// offered what it was, and then SessionOpened. What lived on the other
// replica alone (leased instances, the GET stream, tasks) is not here; a
// Handler learns of the move from Resumed.
func (t *HTTP) resume(r *http.Request, id string) (*httpSession, *httpError) {
	st, ok := t.openID(id)
	if !ok || t.buried(id) {
		return nil, sessionGone()
	}
	principal := identity.Principal{Kind: st.Kind, Issuer: st.Issuer, Subject: st.Subject, Name: st.Name}
	caller := identity.CallerOf(r.Context())
	if !sameOwner(caller.Principal, principal) || ViewOf(r.Context()) != st.View {
		return nil, sessionGone() // word for word, as checkClient
	}
	caller.Principal, caller.Token = principal, identity.Secret{}
	if t.Draining() {
		return nil, (&httpError{status: http.StatusServiceUnavailable, err: jsonrpc.Errorf(jsonrpc.CodeInternalError,
			"this replica is draining and takes up no sessions of other replicas; send it again, the load balancer routes it to another replica")})
	}
	if n := t.Sessions(); n >= t.opts.MaxSessions {
		t.log.Warn("refused to take up a session: the gateway holds its maximum of open sessions", "sessions", n, "max", t.opts.MaxSessions)
		return nil, refusal(http.StatusServiceUnavailable, jsonrpc.CodeInternalError,
			"the gateway holds its maximum of %d open sessions; try again shortly", t.opts.MaxSessions)
	}
	holder := holderOf(principal)
	if err := t.perClient.Take(holder); err != nil {
		return nil, refusal(http.StatusTooManyRequests, jsonrpc.CodeInternalError, "%s", err)
	}
	ctx, cancel := context.WithCancelCause(t.ctx)
	s := &httpSession{
		id: id, ctx: ctx, cancel: cancel, lastUsed: time.Now(), inflight: make(map[callKey]context.CancelCauseFunc), asks: newOutgoing(),
		protocol: st.Version, caps: st.Caps, principal: principal, caller: caller, view: st.View, holder: holder,
		expires: time.Unix(st.Expires, 0), resumedFrom: st.Replica, sealedInfo: st.Info,
	}
	if s.resumedFrom == "" {
		s.resumedFrom = "another replica"
	}
	// The Handler hears the initialize the session began with; its answer
	// went to the client long ago and is dropped.
	params := map[string]any{"protocolVersion": st.Version, "capabilities": orEmpty(st.Caps)}
	if len(st.Info) > 0 {
		params["clientInfo"] = st.Info
	}
	raw, _ := rawjson.Marshal(params)
	init := &Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`"resume"`), Method: "initialize", Params: raw}, Session: s,
		Protocol: st.Version, ClientCapabilities: st.Caps, Principal: principal, Holder: holder,
		View: st.View, Client: caller.Client, Claims: caller.Claims}
	if resp := t.handle(s.ctx, init); resp == nil || resp.Error != nil {
		t.perClient.Give(holder)
		cancel(errResponseEnded)
		return nil, refusal(http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "the session could not be taken up on this replica; try again shortly")
	}
	if st.Level != "" && logLevels[st.Level] {
		// The level the client set, by the path logging/setLevel takes.
		lp, _ := rawjson.Marshal(map[string]string{"level": st.Level})
		t.handle(s.ctx, &Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`"resume-level"`), Method: "logging/setLevel", Params: lp}, Session: s,
			Protocol: st.Version, ClientCapabilities: st.Caps, Principal: principal, Holder: holder,
			View: st.View, Client: caller.Client, Claims: caller.Claims})
	}
	if other, fresh := t.registerResumed(s); !fresh {
		// A request of the same session took it up first.
		t.perClient.Give(holder)
		cancel(errResponseEnded)
		if other == nil {
			return nil, sessionGone()
		}
		return other, nil
	}
	t.h.SessionOpened(s)
	t.log.Info("session taken up from another replica", "session", s.logID(), "from", s.resumedFrom, "protocol", s.protocol)
	return s, nil
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}

// registerResumed registers s unless a session with its id is open
// already, which it returns instead; fresh tells whether s was registered.
func (t *HTTP) registerResumed(s *httpSession) (other *httpSession, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	if o := t.sessions[s.id]; o != nil {
		return o, false
	}
	if o := t.aliases[s.id]; o != nil {
		return o, false
	}
	t.sessions[s.id] = s
	if !t.sweeping {
		t.sweeping = true
		go t.sweepIdle()
	}
	return nil, true
}

// Resumed reports the replica a session was taken up from, when it was
// opened on another replica (or on this one before a restart) and came
// here by its sealed id: what lived only there (leased instances, tasks,
// the GET stream) is gone. "" for a session that began here.
func Resumed(s Session) string {
	if hs, ok := s.(*httpSession); ok {
		return hs.resumedFrom
	}
	return ""
}

// maxReissues bounds the ids one session is given after its first
// (reissue): each stays valid, so each is an entry of the registry.
const maxReissues = 8

// logLevels are the levels of logging/setLevel (RFC 5424's, as MCP has them).
var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true}

// reissue answers a sealed session's logging/setLevel with a new
// Mcp-Session-Id carrying the level, so that a replica taking the session
// up later applies it too. The earlier ids stay valid here (a client may
// keep the id it was given at initialize: its level then stays with this
// replica); clients that follow the header (the TypeScript and Python SDKs
// take the id of any response) carry the level wherever they go.
func (t *HTTP) reissue(p *post, s *httpSession) {
	if s.expires.IsZero() || t.opts.SessionKeys == nil {
		return
	}
	level, ok := stringMember(members(p.msg.Params), "level")
	ring := t.opts.SessionKeys.Ring()
	if !ok || !logLevels[level] || ring == nil {
		return
	}
	st := sealedState{Version: s.protocol, Caps: s.caps, Info: s.sealedInfo, Kind: s.principal.Kind, Name: s.principal.Name,
		Issuer: s.principal.Issuer, Subject: s.principal.Subject, View: s.view,
		Level: level, Replica: t.opts.Replica, Expires: s.expires.Unix()}
	plain, _ := rawjson.Marshal(st)
	token, err := ring.Seal(t.opts.SessionIDPrefix, plain)
	if err != nil {
		return
	}
	id := t.opts.SessionIDPrefix + "." + token
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions[s.id] != s || len(s.aliases) >= maxReissues {
		return
	}
	t.aliases[id] = s
	s.aliases = append(s.aliases, id)
	p.w.Header().Set(headerSessionID, id)
}

// maxDeleted bounds the sealed ids remembered as deleted.
const maxDeleted = 100_000

// bury remembers the ids of a sealed session its client ended with DELETE
// until they expire, so that this replica does not take the session up
// again by them. Other replicas do not hear of the DELETE: there the ids
// open until they expire, as a session idle past --session-idle-ttl does.
func (t *HTTP) bury(s *httpSession) {
	if s.expires.IsZero() {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.deleted) >= maxDeleted {
		for id, exp := range t.deleted {
			if !now.Before(exp) {
				delete(t.deleted, id)
			}
		}
	}
	for _, id := range append([]string{s.id}, s.aliases...) {
		if len(t.deleted) < maxDeleted {
			t.deleted[id] = s.expires
		}
	}
}

// buried reports whether id names a sealed session deleted here.
func (t *HTTP) buried(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.deleted[id]
	return ok
}
