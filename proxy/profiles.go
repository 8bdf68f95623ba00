package proxy

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// A profile narrows what one authenticated client sees and may call: the
// tools, resources and prompts of some servers, the tools whose exported
// names match some patterns. A client without a profile, and every stdio
// client, sees everything. The aggregator's own tools (mcp_status,
// mcp_release, the discovery pair) stay visible: they act on the client's
// own session and show only what its profile allows.

// profile is one config.Profile, ready to match.
type profile struct {
	servers map[string]bool // nil: every server
	tools   []string        // exported-name patterns; nil: every tool
	also    []string        // more patterns a tool must match too (a view within a profile); nil: none
	// match and key, for a profile chosen by who the principal is: the
	// match, and the profile's key in state.profiles (matchKey).
	match config.ProfileMatch
	key   string
	line  int
}

// matchKey is the key of the profile named name that has a match: it
// starts with a NUL, which no client name holds (static names are plain,
// and an OAuth client_id with a control character is refused), so it
// never meets a client's.
func matchKey(name string) string { return "\x00" + name }

// compileProfiles turns the config's profiles into matchers: the profiles
// by client name, and by matchKey the profiles with a match, which
// profileMatchers lists in the order they are tried.
func compileProfiles(m map[string]config.Profile) map[string]*profile {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*profile, len(m))
	for client, cp := range m {
		pr := &profile{tools: slices.Clone(cp.Tools), match: cp.Match, line: cp.Line}
		if cp.Match != (config.ProfileMatch{}) {
			client = matchKey(client)
			pr.key = client
		}
		if len(cp.Servers) > 0 {
			pr.servers = make(map[string]bool, len(cp.Servers))
			for _, s := range cp.Servers {
				pr.servers[s] = true
			}
		}
		out[client] = pr
	}
	return out
}

// profileMatchers are the profiles of m with a match, in the order they
// are tried: those naming a subject, then those naming a claim, each in
// file order. (A profile named after the client comes between the two: see
// profileKey.)
func profileMatchers(m map[string]*profile) []*profile {
	var out []*profile
	for _, pr := range m {
		if pr.key != "" {
			out = append(out, pr)
		}
	}
	slices.SortFunc(out, func(a, b *profile) int {
		if (a.match.Subject != "") != (b.match.Subject != "") {
			if a.match.Subject != "" {
				return -1
			}
			return 1
		}
		return a.line - b.line
	})
	return out
}

// matches reports whether the profile's match chooses who.
func (pr *profile) matches(who identity.Caller) bool {
	if who.Principal.Kind != identity.KindSubject {
		return false
	}
	if pr.match.Subject != "" {
		return who.Principal.Subject == pr.match.Subject
	}
	switch v := who.Claims[pr.match.Claim].(type) {
	case string:
		return v == pr.match.Value
	case []any:
		for _, item := range v {
			if s, ok := item.(string); ok && s == pr.match.Value {
				return true
			}
		}
	}
	return false
}

// profileKey is the key of who's profile in st.profiles: the first
// profile whose subject is who's, else the profile named after who's
// client, else the first whose claim who has; the client's name (which
// then has no profile) when none applies. Without profiles with a match it
// is the client's name, as a lookup costs nothing more.
func (st *state) profileKey(who identity.Caller) string {
	if len(st.matchers) == 0 || who.Principal.Kind != identity.KindSubject {
		return who.Client
	}
	claim := ""
	for _, pr := range st.matchers {
		if pr.match.Subject == "" {
			if _, ok := st.profiles[who.Client]; ok && who.Client != "" {
				return who.Client
			}
			if claim == "" && pr.matches(who) {
				claim = pr.key
			}
			continue
		}
		if pr.matches(who) {
			return pr.key
		}
	}
	if claim != "" {
		return claim
	}
	return who.Client
}

// same reports whether two profiles admit the same things.
func (pr *profile) same(o *profile) bool {
	if pr == nil || o == nil {
		return pr == o
	}
	return maps.Equal(pr.servers, o.servers) && slices.Equal(pr.tools, o.tools) && slices.Equal(pr.also, o.also) && pr.match == o.match
}

// viewSep joins a profile's key and a view's name into the key of the
// view within that profile (viewKey); it holds a NUL, as matchKey does.
const viewSep = "\x00view:"

// viewKey is the key in state.profiles of view within the profile whose
// key is base ("" for none).
func viewKey(base, view string) string { return base + viewSep + view }

// admitsNothing is the profile of a view that is gone: nothing but the
// aggregator's own tools.
var admitsNothing = &profile{servers: map[string]bool{}}

// addViews puts in profiles, for each view, the view within each profile
// and within no profile (viewKey), so that a request at /mcp/<view> finds
// its narrower profile as any other. A view is always within the caller's
// own profile: it never admits what that profile does not.
func addViews(profiles map[string]*profile, views map[string]config.View) map[string]*profile {
	if len(views) == 0 {
		return profiles
	}
	out := make(map[string]*profile, len(profiles)*(len(views)+1)+len(views))
	maps.Copy(out, profiles)
	for name, cv := range views {
		v := compileProfiles(map[string]config.Profile{"v": {Servers: cv.Servers, Tools: cv.Tools}})["v"]
		out[viewKey("", name)] = v
		for key, pr := range profiles {
			out[viewKey(key, name)] = within(v, pr)
		}
	}
	return out
}

// within is view v narrowed to what profile pr admits too.
func within(v, pr *profile) *profile {
	out := &profile{servers: v.servers, tools: v.tools}
	switch {
	case pr.servers == nil:
	case v.servers == nil:
		out.servers = pr.servers
	default:
		out.servers = map[string]bool{}
		for id := range v.servers {
			if pr.servers[id] {
				out.servers[id] = true
			}
		}
	}
	switch {
	case pr.tools == nil:
	case v.tools == nil:
		out.tools = pr.tools
	default:
		out.also = pr.tools
	}
	return out
}

// server reports whether the profile admits a server; a nil profile admits
// every one.
func (pr *profile) server(id string) bool {
	return pr == nil || pr.servers == nil || pr.servers[id]
}

// tool reports whether the profile admits a catalog entry.
func (pr *profile) tool(e *catalog.Entry) bool {
	if pr == nil || e.Server == adminServer {
		return true
	}
	if !pr.server(e.Server) {
		return false
	}
	return (pr.tools == nil || matchesAny(pr.tools, e.Exported)) && (pr.also == nil || matchesAny(pr.also, e.Exported))
}

// matchesAny reports whether name matches one of patterns.
func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if naming.Match(p, name) {
			return true
		}
	}
	return false
}

// profileOf is the profile of client under st; nil when it has none.
func (st *state) profileOf(client string) *profile {
	if client == "" {
		return nil
	}
	if pr, ok := st.profiles[client]; ok {
		return pr
	}
	if strings.Contains(client, viewSep) {
		return admitsNothing // a view a reload took away
	}
	return nil
}

// requestProfile is the key of the profile of a request at view (""
// for /mcp itself) from who: its own profile's (profileKey), or that of
// the view within it.
func (st *state) requestProfile(who identity.Caller, view string) string {
	key := st.profileKey(who)
	if view == "" {
		return key
	}
	if _, ok := st.profiles[key]; !ok {
		key = ""
	}
	return viewKey(key, view)
}

// HasView reports whether a view of that name is configured: /mcp/<name>
// serves it.
func (p *Proxy) HasView(name string) bool {
	_, ok := p.current().profiles[viewKey("", name)]
	return ok
}

// Restricted reports whether a profile narrows what who may see: such a
// caller is refused the views of the whole gateway (the status page,
// /status.json, /metrics), which would show it every server. profile is
// the name of that profile in the config.
func (p *Proxy) Restricted(who identity.Caller) (profile string, restricted bool) {
	st := p.current()
	key := st.profileKey(who)
	return strings.TrimPrefix(key, matchKey("")), st.profileOf(key) != nil
}

// visibleTool reports whether client may see and call the tool exported as name.
func (st *state) visibleTool(client, name string) bool {
	pr := st.profileOf(client)
	if pr == nil {
		return true
	}
	e, ok := st.catalog.Lookup(name)
	return ok && pr.tool(e)
}

// Lists a client is sent, by kind: the member name of the list result.
const (
	listTools     = "tools"
	listResources = catalog.ListResources
	listTemplates = catalog.ListTemplates
	listPrompts   = catalog.ListPrompts
)

// view renders the list of kind as client sees it under st.
func (st *state) view(kind, client string) json.RawMessage {
	pr := st.profileOf(client)
	switch kind {
	case listTools:
		if pr == nil {
			return st.listedTools()
		}
		return st.filteredTools(pr)
	case listResources, listTemplates, listPrompts:
		return st.surfaceOf(pr).List(kind)
	}
	return nil
}

// surfaceOf is the surface a client with profile pr sees: with a profile
// that names servers, the surface of those servers alone, in config
// order. A server outside the profile then takes no part: it neither keeps
// a URI, a template or a prompt name the client's own servers offer too,
// nor answers for a URI none of them lists.
func (st *state) surfaceOf(pr *profile) *catalog.Surface {
	if pr == nil || (pr.servers == nil && pr.tools == nil) {
		return st.surface
	}
	return buildSurface(st.profileOrder(pr), st.servers, st.pattern, st.hiddenApps(pr))
}

// profileOrder is the servers of pr, in config order.
func (st *state) profileOrder(pr *profile) []string {
	order := make([]string, 0, len(pr.servers))
	for _, id := range st.order {
		if pr.server(id) {
			order = append(order, id)
		}
	}
	return order
}

// filteredTools is tools/list for a client with a profile: in search mode
// what search mode lists (the aggregator's tools, discovery.always), else
// the catalog, each time only what the profile admits.
func (st *state) filteredTools(pr *profile) json.RawMessage {
	b := bytes.NewBufferString("[")
	for _, e := range st.catalog.Entries() {
		if st.search != nil && e.Server != adminServer && !catalog.AlwaysListed(st.discovery.Always, e.Exported) {
			continue
		}
		if pr.tool(e) {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			b.Write(e.Raw)
		}
	}
	b.WriteByte(']')
	return b.Bytes()
}

// views caches the lists and surfaces of clients with a profile for one
// state, so that a tools/list is not a walk of the catalog, nor a request
// for a resource a build of the surface.
type views struct {
	st *state
	m  sync.Map // kind + "\x00" + client -> json.RawMessage; "surface\x00" + client -> *catalog.Surface
}

// viewsOf is the cache of st; nil when a newer state raced in.
func (p *Proxy) viewsOf(st *state) *views {
	v := p.views.Load()
	if v != nil && v.st == st {
		return v
	}
	fresh := &views{st: st}
	if p.views.CompareAndSwap(v, fresh) {
		return fresh
	}
	if v = p.views.Load(); v != nil && v.st == st {
		return v
	}
	return nil
}

// listed is the list of kind req's client is sent under st.
func (p *Proxy) listed(st *state, kind, client string) json.RawMessage {
	if st.profileOf(client) == nil {
		return st.view(kind, client) // the shared, pre-rendered list
	}
	if kind != listTools {
		return p.clientSurface(st, client).Result(kind)
	}
	v := p.viewsOf(st)
	if v == nil {
		return st.view(kind, client) // a newer state raced in: do not cache
	}
	key := kind + "\x00" + client
	if raw, ok := v.m.Load(key); ok {
		return raw.(json.RawMessage)
	}
	raw := st.view(kind, client)
	v.m.Store(key, raw)
	return raw
}

// clientSurface is st.surfaceOf for client's profile, built once per state.
func (p *Proxy) clientSurface(st *state, client string) *catalog.Surface {
	pr := st.profileOf(client)
	if pr == nil || (pr.servers == nil && pr.tools == nil) {
		return st.surface
	}
	v := p.viewsOf(st)
	if v == nil {
		return st.surfaceOf(pr)
	}
	key := "surface\x00" + client
	if s, ok := v.m.Load(key); ok {
		return s.(*catalog.Surface)
	}
	s := st.surfaceOf(pr)
	v.m.Store(key, s)
	return s
}

// announce tells the sessions and listen streams whose list of kind
// changed between old and next. Without profiles that is everyone when
// changed is set; with them, a client with a profile is told when its own
// view changed, which a profile edit alone can do.
func (p *Proxy) announce(old, next *state, kind string, changed bool) {
	if len(old.profiles) == 0 && len(next.profiles) == 0 {
		if changed {
			p.clients.changed(kind)
		}
		return
	}
	kinds := []string{kind}
	if kind == listResources {
		kinds = append(kinds, listTemplates)
	}
	decided := map[string]bool{}
	p.clients.changedFor(kind, p.sessionClient, func(client string) bool {
		if d, ok := decided[client]; ok {
			return d
		}
		d := changed
		if old.profileOf(client) != nil || next.profileOf(client) != nil {
			d = false
			for _, k := range kinds {
				if !bytes.Equal(old.view(k, client), next.view(k, client)) {
					d = true
				}
			}
		}
		decided[client] = d
		return d
	})
}

// profilesChanged reports whether a reload changed any profile.
func profilesChanged(a, b map[string]*profile) bool {
	if len(a) != len(b) {
		return true
	}
	for c, pa := range a {
		if !pa.same(b[c]) {
			return true
		}
	}
	return false
}

// admits reports whether client's profile, as it is now, admits server:
// what a server sends reaches a client only while it does, so that a
// profile edit cuts a client off from the notifications of a server it
// takes out, whatever the client subscribed to or leased before.
func (p *Proxy) admits(client, server string) bool {
	return p.current().profileOf(client).server(server)
}

// revokeLeases ends the leases clients hold of servers their profiles
// under st no longer admit: a profile edit that takes a server out of a
// client's profile stops that client's instances of it, with whatever
// they held for it.
func (p *Proxy) revokeLeases(st *state) {
	for id, rs := range st.servers {
		if rs.pool.Stateless() {
			continue
		}
		rs.pool.Revoke(func(key session.Key, owner any) bool {
			if o, ok := owner.(*leaseOwner); ok {
				// Whoever the profile is chosen by (an OAuth user's subject
				// or claims, a client, the view): as the next call would be.
				return !st.profileOf(st.requestProfile(o.caller, o.view)).server(id)
			}
			client := key.Client.Client()
			return client != "" && !st.profileOf(client).server(id)
		})
	}
}

// leaseOwner is who a lease's latest call came from, as far as its profile
// goes (session.Claim): the principal, client and claims (never the
// token) and the view.
type leaseOwner struct {
	caller identity.Caller
	view   string
}

// ownerOf is the leaseOwner of req.
func ownerOf(req *downstream.Request) leaseOwner {
	return leaseOwner{caller: identity.Caller{Principal: req.Principal, Client: req.Client, Claims: req.Claims}, view: req.View}
}

// is reports whether o is ownerOf(req): the same principal, client and
// view, and the same claims (no claims, or the one map of verified claims,
// which a caller's requests share until its token changes).
func (o *leaseOwner) is(req *downstream.Request) bool {
	if o.caller.Principal != req.Principal || o.caller.Client != req.Client || o.view != req.View {
		return false
	}
	a, b := o.caller.Claims, req.Claims
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// requestClient is the key of the profile of the principal a request
// comes from (Request.Profile, set on arrival by Handle): its client's
// name, or a matched profile's key; "" for none.
func requestClient(req *downstream.Request) string {
	if req == nil {
		return ""
	}
	return req.Profile
}

// sessionClient is the key of the profile of the principal that opened s,
// as requestClient.
func (p *Proxy) sessionClient(s downstream.Session) string {
	if c, ok := s.(downstream.CallerSession); ok {
		return p.current().requestProfile(c.Caller(), c.View())
	}
	return s.Principal().Client()
}

// visibility is the search filter of client: nil (everything) without a
// profile.
func (st *state) visibility(client string) func(name string) bool {
	if st.profileOf(client) == nil {
		return nil
	}
	return func(name string) bool { return st.visibleTool(client, name) }
}

// narrowStatus is what mcp_status shows a client with a profile: its
// servers, the instances of those servers that are shared or its own (not
// those leased to other clients), and the problems of its servers only
// (the rest of the config, http.auth included, is none of its business).
// space is the lease space of the caller's own leases (session.Key.Client).
func (p *Proxy) narrowStatus(st *state, client string, space identity.Principal, s Status) Status {
	pr := st.profileOf(client)
	if pr == nil {
		return s
	}
	servers := s.Servers[:0:0]
	for _, srv := range s.Servers {
		if pr.server(srv.ID) {
			// Its tools as the client sees them, not how many the
			// server exports.
			srv.Tools = 0
			for _, e := range st.catalog.Server(srv.ID) {
				if pr.tool(e) {
					srv.Tools++
				}
			}
			servers = append(servers, srv)
		}
	}
	s.Servers = servers
	instances := s.Instances[:0:0]
	for _, in := range s.Instances {
		if pr.server(in.Server) && (in.lease.IsZero() || in.lease.Client == space) {
			instances = append(instances, in)
		}
	}
	s.Instances = instances
	s.Problems = []string{}
	for _, prob := range p.Problems() {
		if prob.Server != "" && pr.server(prob.Server) {
			s.Problems = append(s.Problems, p.opts.Upstream.Secrets.String(prob.String()))
		}
	}
	return s
}
