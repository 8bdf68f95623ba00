package proxy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// adminServer owns the reserved names of the built-in admin toolset.
const adminServer = "mcp_admin"

var adminTools = map[string]json.RawMessage{
	"mcp_release": json.RawMessage(`{"name":"mcp_release","title":"Release a leased MCP server instance",` +
		`"description":"Release the dedicated instance of an MCP server that this session holds. Call it when you are confident you will not need that server's tools again soon; its process stops and its state is discarded. A later call to one of its tools leases a fresh instance.",` +
		`"inputSchema":{"type":"object","properties":{"serverId":{"type":"string","description":"Id of the server to release, as shown by mcp_status."}},"required":["serverId"],"additionalProperties":false},` +
		`"annotations":{"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}}`),
	"mcp_status": json.RawMessage(`{"name":"mcp_status","title":"MCP aggregator status",` +
		`"description":"Report every upstream MCP server behind this aggregator (transport, shared or leased, health, exported tool count), the instances this session holds, current configuration problems, and the registry version.",` +
		`"inputSchema":{"type":"object","properties":{},"additionalProperties":false},` +
		`"annotations":{"readOnlyHint":true,"openWorldHint":false}}`),
}

// adminEntries are the admin tools' catalog entries under admin.
func adminEntries(admin config.Admin) []*catalog.Entry {
	if !admin.Enabled {
		return nil
	}
	names := make([]string, 0, len(adminTools))
	for n := range adminTools {
		names = append(names, n)
	}
	sort.Strings(names)
	entries := make([]*catalog.Entry, 0, len(names))
	for _, n := range names {
		entries = append(entries, &catalog.Entry{Exported: n, Server: adminServer, Original: n, Raw: adminTools[n]})
	}
	return entries
}

func withAdmin(c *catalog.Catalog, entries []*catalog.Entry) *catalog.Catalog {
	return c.WithServer(adminServer, entries)
}

// textResult renders a tool result of one text item.
func textResult(isError bool, text string) json.RawMessage {
	result := map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}}
	if isError {
		result["isError"] = true
	}
	body, _ := rawjson.Marshal(result)
	return body
}

// status answers mcp_status: the servers, the caller's leases and the
// current problems, as far as the caller's profile lets it see them.
func (o *ownServer) status() json.RawMessage {
	body, err := json.MarshalIndent(o.p.narrowStatus(o.st, o.client, o.key.Client, o.p.status(o.st, o.key)), "", "  ")
	if err != nil {
		return textResult(true, err.Error())
	}
	return textResult(false, string(body))
}

// release answers mcp_release: the caller's lease of the server it names
// ends.
func (o *ownServer) release(rawArgs json.RawMessage) json.RawMessage {
	var args struct {
		ServerID string `json:"serverId"`
	}
	if err := json.Unmarshal(rawArgs, &args); err != nil || args.ServerID == "" {
		return textResult(true, `mcp_release needs {"serverId": "<id>"}; mcp_status lists the ids`)
	}
	rs := o.st.servers[args.ServerID]
	if rs == nil || !o.st.profileOf(o.client).server(args.ServerID) {
		// A server outside the client's profile is answered as one that
		// does not exist: nothing tells the client it is there.
		return textResult(true, fmt.Sprintf("no server %q is running; mcp_status lists the ids", args.ServerID))
	}
	if rs.pool.Stateless() {
		return textResult(false, fmt.Sprintf("server %q is shared by every session (truely-stateless); there is no lease to release", args.ServerID))
	}
	if !rs.pool.Release(o.key) {
		return textResult(false, fmt.Sprintf("this session holds no instance of server %q; nothing to release", args.ServerID))
	}
	return textResult(false, fmt.Sprintf("released this session's instance of server %q", args.ServerID))
}

// Status is what mcp_status reports.
type Status struct {
	Version  uint64         `json:"registryVersion"`
	Servers  []ServerStatus `json:"servers"`
	Leases   []LeaseStatus  `json:"leases"`
	Problems []string       `json:"problems"`
	// Supervision says how upstream processes are tracked: cgroup,
	// subreaper or process-group (see supervise.Supervisor).
	Supervision string           `json:"supervision,omitempty"`
	Instances   []InstanceStatus `json:"instances"`
}

// healthStarting is the health of a server whose first instance is being
// started: nothing of it runs yet, and nothing of it has failed.
const healthStarting = "starting"

// ServerStatus describes one server of the config: running, failed, or starting.
type ServerStatus struct {
	ID        string `json:"id"`
	Transport string `json:"transport"`
	Mode      string `json:"mode"` // shared | leased
	Health    string `json:"health"`
	Tools     int    `json:"tools"`
	Resources int    `json:"resources,omitempty"`
	Templates int    `json:"resourceTemplates,omitempty"`
	Prompts   int    `json:"prompts,omitempty"`
	Instances int    `json:"instances"`
	Leased    int    `json:"leased,omitempty"`
	Spares    int    `json:"spares,omitempty"`
	// Waiting is the calls of sessions waiting at lease.max_instances or
	// limits.max_instances for an instance to lease.
	Waiting int `json:"waiting,omitempty"`
	PID     int `json:"pid,omitempty"`
}

// serverMode is how s hands out its instances, as mcp_status names it:
// shared (truely-stateless) or leased.
func serverMode(s *config.Server) string {
	if s.Stateless {
		return "shared"
	}
	return "leased"
}

// LeaseStatus is one instance the calling session holds.
type LeaseStatus struct {
	Server string `json:"serverId"`
	PID    int    `json:"pid,omitempty"`
}

// Status reports the servers, the leases of key, and current problems.
func (p *Proxy) Status(key session.Key) Status { return p.status(p.current(), key) }

func (p *Proxy) status(cur *state, key session.Key) Status {
	cat := cur.catalog
	st := Status{Version: p.Version(), Servers: []ServerStatus{}, Leases: []LeaseStatus{}, Problems: []string{},
		Supervision: p.opts.Upstream.Supervisor.Mode(), Instances: p.instanceStatus(key)}
	ids := make([]string, 0, len(cur.servers))
	for id := range cur.servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rs := cur.servers[id]
		stats := rs.pool.Stats()
		ss := ServerStatus{ID: id, Transport: string(rs.cfg.Transport), Tools: len(cat.Server(id)), Instances: stats.Live, Health: "ok"}
		ss.Resources, ss.Templates, ss.Prompts = cur.surface.Counts(id)
		ss.Mode = serverMode(rs.cfg)
		if rs.pool.Stateless() {
			ss.PID = stats.SharedPID
			if stats.Down != "" {
				ss.Health = "down: " + stats.Down + "; restarting with backoff"
			} else if !stats.SharedAlive {
				ss.Health = "down; restarting"
			}
		} else {
			ss.Leased, ss.Spares, ss.Waiting = stats.Leased, stats.Spares, stats.Waiting
		}
		st.Servers = append(st.Servers, ss)
		if pid, ok := rs.pool.Held(key); ok {
			st.Leases = append(st.Leases, LeaseStatus{Server: id, PID: pid})
		}
	}
	failedIDs := make([]string, 0, len(cur.failed))
	for id := range cur.failed {
		failedIDs = append(failedIDs, id)
	}
	sort.Strings(failedIDs)
	for _, id := range failedIDs {
		f := cur.failed[id]
		retry := "; fix the config to retry"
		if strings.Contains(f.why, "mcp-aggregator login") {
			retry = "; it starts once you log in as it says" // the token directory is watched
		}
		st.Servers = append(st.Servers, ServerStatus{ID: id, Transport: string(f.cfg.Transport), Mode: serverMode(f.cfg),
			Health: "failed: " + f.why + retry})
	}
	startingIDs := make([]string, 0, len(cur.starting))
	for id := range cur.starting {
		if cur.servers[id] == nil && cur.failed[id].cfg == nil {
			startingIDs = append(startingIDs, id)
		}
	}
	sort.Strings(startingIDs)
	for _, id := range startingIDs {
		s := cur.starting[id]
		st.Servers = append(st.Servers, ServerStatus{ID: id, Transport: string(s.Transport), Mode: serverMode(s), Health: healthStarting})
	}
	for _, pr := range append(append(append([]config.Problem(nil), cur.problems...), cur.surface.Problems()...), p.authProblems()...) {
		st.Problems = append(st.Problems, pr.String())
	}
	// What servers said reaches mcp_status here: scrubbed of every secret
	// known now, a token learnt after the text was made included.
	secrets := p.opts.Upstream.Secrets
	for i := range st.Servers {
		st.Servers[i].Health = secrets.String(st.Servers[i].Health)
	}
	for i := range st.Problems {
		st.Problems[i] = secrets.String(st.Problems[i])
	}
	return st
}
