package proxy

import (
	"maps"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// A server that keeps state per session may list resources, templates or
// prompts of one session only: a resource made for it, say. When such a
// list changes on an instance leased to a session, the change is that
// session's, as it would be were the session connected to the server
// directly: the session sees the instance's own lists in place of the
// server's, and only it is told they changed. The catalog every session
// shares stays as it was, so no session sees, or loses, what another
// session's instance lists.

// ownLists are the lists a leased instance gave after its list_changed;
// immutable once stored (a later change stores a new value).
type ownLists struct {
	server                   string
	hasResources, hasPrompts bool
	resources                []upstream.Resource
	templates                []upstream.ResourceTemplate
	prompts                  []upstream.Prompt
}

// keepOwnLists records what inst, leased to the session holding it, now
// lists of kind ("resources" or "prompts"), and tells that session. It
// reports false when inst is not an instance leased to a session: its
// lists are then the server's.
func (p *Proxy) keepOwnLists(rs *runningServer, inst *upstream.Instance, kind string,
	resources []upstream.Resource, templates []upstream.ResourceTemplate, prompts []upstream.Prompt) bool {
	if rs.pool.Stateless() {
		return false
	}
	holder := p.sessions.boundTo(inst)
	if holder == nil {
		return false // a spare: what it lists is what the server lists
	}
	kept := holder.keepOwn(inst, func(prev *ownLists) *ownLists {
		own := &ownLists{server: rs.cfg.ID}
		if prev != nil {
			*own = *prev
		}
		if kind == "prompts" {
			own.hasPrompts, own.prompts = true, prompts
		} else {
			own.hasResources, own.resources, own.templates = true, resources, templates
		}
		return own
	})
	if !kept {
		return false // unbound since
	}
	p.clients.changedIn(holder.lease, kind)
	return true
}

// surfaceFor is the surface the caller of req, of client, sees: the one of
// the client's profile (clientSurface), with the own lists of the
// instances its Session (its downstream session's, or its conversation's)
// leases in place of their servers' lists.
func (p *Proxy) surfaceFor(st *state, client string, req *downstream.Request) *catalog.Surface {
	base := p.clientSurface(st, client)
	own := p.callerSession(req).ownLists()
	if len(own) == 0 {
		return base
	}
	var servers map[string]*runningServer
	for inst, lists := range own {
		rs := st.servers[lists.server]
		if rs == nil || !rs.pool.Owns(inst) {
			continue // replaced or removed since
		}
		if servers == nil {
			servers = maps.Clone(st.servers)
		}
		u := *servers[lists.server]
		if lists.hasResources {
			u.resources, u.templates = lists.resources, lists.templates
		}
		if lists.hasPrompts {
			u.prompts = lists.prompts
		}
		servers[lists.server] = &u
	}
	if servers == nil {
		return base
	}
	order := st.order
	pr := st.profileOf(client)
	if pr != nil && pr.servers != nil {
		order = st.profileOrder(pr)
	}
	return buildSurface(order, servers, st.pattern, st.hiddenApps(pr))
}

// callerSession is the Session of req's caller (findRequestSession), or
// nil when it has none.
func (p *Proxy) callerSession(req *downstream.Request) *Session {
	if req == nil {
		return nil
	}
	key, _ := LeaseKeyOf(req, requestMeta(req.Msg.Params))
	return p.findRequestSession(req, key)
}
