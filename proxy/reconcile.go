package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// drainTimeout bounds how long a removed or replaced server may take to
// finish its in-flight calls before it is closed regardless.
const drainTimeout = 30 * time.Second

// runningServer is one committed server: its config, its instances and the
// naming plan its catalog entries came from.
type runningServer struct {
	cfg   *config.Server
	pool  *session.Pool
	tools []upstream.Tool
	plan  naming.Plan
	// What the instance that started the server declared and listed.
	caps      upstream.Capabilities
	resources []upstream.Resource
	templates []upstream.ResourceTemplate
	prompts   []upstream.Prompt
	leftOut   []string // what its tool list left out (upstream.Instance.LeftOut)
	// taskCalls is whether caps declare task-augmented tools/call, read
	// once (tasksCall), for bridgesTask.
	taskCalls bool
}

// withTools returns a copy of rs with another tool list and plan.
func (rs *runningServer) withTools(cfg *config.Server, tools []upstream.Tool, plan naming.Plan) *runningServer {
	n := *rs
	n.cfg, n.tools, n.plan = cfg, tools, plan
	return &n
}

// fromInstance fills what inst declared and listed.
func (rs *runningServer) fromInstance(inst *upstream.Instance) *runningServer {
	rs.caps, rs.resources, rs.templates, rs.prompts = inst.Capabilities(), inst.Resources(), inst.ResourceTemplates(), inst.Prompts()
	rs.leftOut = inst.LeftOut()
	rs.taskCalls = tasksCall(rs.caps)
	return rs
}

// Report is the outcome of one Reconcile.
type Report struct {
	Problems []config.Problem
	// Notes are what the config asked for and was done, such as tools the filters
	// excluded: one line per server planned in this reconcile, not problems.
	Notes []string
	// Applied says, one line per server, which settings of its pool (see
	// poolChanges) were applied to its running instances without a restart.
	Applied []string
	// Failed lists servers whose start or update failed in this reconcile.
	Failed []string
	// StartFailed are the problems of Problems that Options.OnStartFailed
	// was given as they happened.
	StartFailed []config.Problem
	// Abandoned lists servers whose start the end of ctx cut short (the
	// aggregator stops): not failures, since nothing was wrong with them.
	Abandoned []string
	// Changed is true when the exported catalog changed (and clients were told).
	Changed bool
	Version uint64
}

// prepared is a server started outside any lock, waiting to be committed.
type prepared struct {
	cfg  *config.Server
	inst *upstream.Instance
	err  error
}

// Reconcile makes the running servers match ws. Servers whose hash did not
// change are not touched. New and changed servers are started in parallel
// outside any lock, then each is committed on its own: one that fails keeps
// its last good instance and tools. A nil ws (a workspace-level error)
// changes nothing. Clients get one tools/list_changed if, and only if, the
// exported catalog changed.
//
// Concurrency rule: no lock that a commit needs is held while an upstream
// starts. Reconciles run one at a time (reconcileMu, which only the next
// reconcile waits for, and Supersede cuts short); reloadMu is held while a
// reconcile plans and commits, and let go while it waits for starts, so
// that a relist of a running server and Close commit meanwhile. After each
// wait the reconcile takes in what they committed (rebase), and commits
// nothing once Close has begun.
func (p *Proxy) Reconcile(ctx context.Context, ws *config.Workspace, loadProblems []config.Problem) Report {
	p.reconcileMu.Lock()
	defer p.reconcileMu.Unlock()
	// What Close left to this reconcile to stop, stopped once reloadMu is
	// let go (deferred calls run last first) and before the next reconcile.
	var stale []func()
	defer func() {
		for _, stop := range stale {
			stop()
		}
	}()
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	defer p.MarkLoaded()
	report := Report{Problems: append([]config.Problem(nil), loadProblems...)}
	if p.closed.Load() {
		// Close has taken every server down, or is doing so: a reload that
		// comes after it starts nothing that nobody would stop.
		report.Version = p.Version()
		return report
	}
	defer func(start time.Time) { p.observeReload(start, ws, report) }(time.Now())
	if ws == nil {
		report.Version = p.Version()
		p.setProblems(report.Problems)
		return report
	}
	if p.opts.OnWorkspace != nil {
		p.opts.OnWorkspace(ws)
	}
	p.ledger.SetLimits(ws.Limits.MaxInstances, ws.Limits.MaxRSS)
	p.results.SetMaxBytes(ws.Cache.MaxBytes)
	// Workspace settings take effect with the first commit below.
	settings := p.current().with()
	settings.admin = ws.Admin
	settings.discovery = ws.Discovery
	settings.pattern = ws.Naming.ValidPattern
	settings.profiles = compileProfiles(ws.Profiles)
	settings.matchers = profileMatchers(settings.profiles)
	settings.profiles = addViews(settings.profiles, ws.Views)
	settings.policy = ws.Policy
	if !settings.rates.same(ws.RateLimits) {
		settings.rates = newRateLimits(ws.RateLimits)
	}
	p.setAudit(ws.Audit)
	settings.required = requiredServers(ws)
	if share := p.callsPerClient(ws.Limits.MaxConcurrent); !settings.limits.same(ws.Limits.MaxConcurrent, share) {
		// Calls in flight release the slots of the limiter they took them from.
		settings.limits = newLimiter(ws.Limits.MaxConcurrent, share)
	}
	current := maps.Clone(settings.servers)
	// seen are the servers as this reconcile last published or read them;
	// state maps are replaced whole, never written in place.
	seen := settings.servers

	desired := map[string]bool{}
	var todo, replan []*config.Server
	for _, s := range ws.Servers {
		desired[s.ID] = true
		switch rs := current[s.ID]; {
		case rs == nil:
			todo = append(todo, s)
		case rs.cfg.Hash == s.Hash:
		case sameRuntime(rs.cfg, s):
			replan = append(replan, s) // only naming changed: keep the process
		default:
			todo = append(todo, s)
		}
	}
	for _, id := range ws.Rejected {
		desired[id] = true // keeps its last good state
	}

	// Servers with nothing running yet are shown as starting until their
	// start is over: a client asking meanwhile learns they are coming.
	starting := map[string]*config.Server{}
	for _, s := range todo {
		if current[s.ID] == nil {
			starting[s.ID] = s
		}
	}
	settings.starting = maps.Clone(starting)
	if len(starting) > 0 {
		shown := p.current().with()
		shown.starting = maps.Clone(starting)
		p.publish(shown)
	}

	results := p.prepare(ctx, todo)

	// Commit, in the order that avoids collisions: removed servers leave
	// first, then new and changed ones take their names (see apply for how
	// new servers share them out in config order).
	cat := p.Catalog()
	var retired []*runningServer
	next := current
	for id, rs := range current {
		if !desired[id] {
			cat = cat.WithServer(id, nil)
			delete(next, id)
			retired = append(retired, rs)
			p.log.Info("server removed", "server", id)
		}
	}
	// The aggregator's own tools are planned around as ws has them: names
	// of tools it turns off are free for upstream tools (reclaim below hands
	// them out), and a server holding the name of one it turns on gives the
	// name up.
	cat = withAdmin(cat, append(adminEntries(ws.Admin), discoveryEntries(ws.Discovery, cat)...))
	for _, id := range slices.Sorted(maps.Keys(next)) {
		rs := next[id]
		if !yields(cat, id) {
			continue
		}
		plan, entries := p.plan(rs.cfg, rs.tools, cat.WithServer(id, nil), ws.Naming.ValidPattern)
		if plan.Failed {
			continue // names taken never make a plan fail; see reclaim
		}
		next[id] = rs.withTools(rs.cfg, rs.tools, plan)
		cat = cat.WithServer(id, entries)
		p.log.Info("server gave up names to the aggregator's own tools", "server", id, "tools", len(entries))
	}
	replanFailed := map[string]bool{}
	for _, s := range replan {
		old := next[s.ID]
		plan, entries := p.plan(s, old.tools, cat.WithServer(s.ID, nil), ws.Naming.ValidPattern)
		report.Notes = append(report.Notes, exclusionNotes(s, plan)...)
		if plan.Failed {
			// Its last good plan stays; the problems are the new plan's.
			report.Problems = append(report.Problems, namingProblems(s, plan)...)
			report.Problems = append(report.Problems, leftOutProblems(s, old.leftOut)...)
			report.Failed = append(report.Failed, s.ID)
			replanFailed[s.ID] = true
			continue
		}
		next[s.ID] = old.withTools(s, old.tools, plan)
		cat = cat.WithServer(s.ID, entries)
		p.log.Info("server re-planned without restart", "server", s.ID, "tools", len(entries))
		if changes := poolChanges(old.cfg, s); len(changes) > 0 {
			// Running instances keep serving their sessions; the pool takes
			// the new settings as they are committed below.
			cfg := poolConfig(s)
			cfg.MaxLeasesPerClient = p.leasesPerClient(s)
			old.pool.Adjust(cfg)
			report.Applied = append(report.Applied, s.ID+": "+strings.Join(changes, ", "))
		}
	}
	order := make([]string, 0, len(ws.Servers))
	for _, s := range ws.Servers {
		order = append(order, s.ID)
	}
	// Names that left with a removed server, or that a re-planned one no
	// longer exports, go to the tools that had to skip them.
	cat, _ = p.reclaim(cat, next, order, func(id string) bool { return contains(todo, id) }, ws.Naming.ValidPattern)

	// Servers are committed in waves: whatever is ready when a wave closes
	// goes live together, so a quick reload notifies clients once, while one
	// slow server never holds back the tools of the others.
	//
	// Names held before this reconcile (admin tools, running servers, the
	// previous tools of a changed server) stay with their holder. Among the
	// servers this reconcile starts from nothing, which on a fresh start is
	// all of them, a name goes to the first in config order, whatever order
	// they finish starting in. Waiting for every earlier server before
	// applying a later one would give that too, but would let one slow or
	// hanging server hold back all the servers after it. So each server is
	// applied as soon as it is ready, and a new server that is ready late
	// takes back the names that new servers later in the config got only by
	// being ready first: those are planned again, after it, against the
	// catalog it joined. Their tools stay as listed at start; only which
	// names they export changes, and the warnings are taken from the final
	// plans, so each names the server that keeps the name. Calls follow the
	// name from the wave that moves it on; a client that listed in between
	// hears tools/list_changed if the move changed what it lists.
	fresh := map[string]int{} // new server -> its place among todo, which is in config order
	for i, s := range todo {
		if current[s.ID] == nil {
			fresh[s.ID] = i
		}
	}
	planned := map[string]naming.Plan{} // the last plan of each server started here
	failed := map[string]failedServer{}
	var started []string             // servers with new instances, not yet committed
	var startFailed []config.Problem // problems of failed starts, not yet published
	apply := func(pr prepared) {
		s := pr.cfg
		delete(starting, s.ID) // shown from the next wave on as what came of it
		if pr.err != nil && ctx.Err() != nil {
			// Stopping: the start was given up, which says nothing about
			// the server, so it is no problem to report or alert on.
			report.Abandoned = append(report.Abandoned, s.ID)
			p.log.Info("server start abandoned: stopping", "server", s.ID)
			return
		}
		if errors.Is(pr.err, errSuperseded) {
			// Not a failure of the server: the next reconcile decides
			// what runs. What ran before keeps running until then.
			p.log.Info("server start abandoned: a newer config came while it started", "server", s.ID)
			return
		}
		if pr.err != nil {
			// Told now, and shown from the next wave on: the others may
			// take their connect_timeout to end.
			problem := startProblem(s, pr.err)
			report.Failed = append(report.Failed, s.ID)
			report.Problems = append(report.Problems, problem)
			report.StartFailed = append(report.StartFailed, problem)
			startFailed = append(startFailed, problem)
			if p.opts.OnStartFailed != nil {
				p.opts.OnStartFailed(problem)
			}
			if next[s.ID] == nil {
				failed[s.ID] = failedServer{cfg: s, why: pr.err.Error()}
			}
			return
		}
		// The new servers after s in the config that are already placed make
		// way for s, and are planned again after it.
		before, base := cat, cat
		var after []string
		if i, ok := fresh[s.ID]; ok {
			for _, t := range todo[i+1:] {
				if _, isNew := fresh[t.ID]; isNew && next[t.ID] != nil {
					after = append(after, t.ID)
					base = base.WithServer(t.ID, nil)
				}
			}
		}
		plan, entries := p.plan(s, pr.inst.Tools(), base, ws.Naming.ValidPattern)
		planned[s.ID] = plan
		report.Problems = append(report.Problems, leftOutProblems(s, pr.inst.LeftOut())...)
		if plan.Failed {
			report.Failed = append(report.Failed, s.ID)
			go pr.inst.Close()
			if next[s.ID] == nil {
				// Nothing of it runs: it is listed as failed, as a server
				// that could not start is.
				failed[s.ID] = failedServer{cfg: s, why: planFailure(plan)}
			}
			return
		}
		rs := (&runningServer{cfg: s, tools: pr.inst.Tools(), plan: plan}).fromInstance(pr.inst)
		rs.pool = p.newPool(s, pr.inst)
		if old := next[s.ID]; old != nil {
			retired = append(retired, old)
		}
		started = append(started, s.ID)
		next[s.ID] = rs
		cat = base.WithServer(s.ID, entries)
		p.log.Info("server ready", "server", s.ID, "tools", len(entries), "pid", pr.inst.PID())
		for _, id := range after {
			rs := next[id]
			// Taking names away never makes a plan fail: a name owned
			// elsewhere is a warning.
			plan, entries := p.plan(rs.cfg, rs.tools, cat, ws.Naming.ValidPattern)
			if len(before.Server(id)) != len(entries) {
				p.log.Info("server gave up names to one before it in the config", "server", id, "by", s.ID, "tools", len(entries))
			}
			next[id] = rs.withTools(rs.cfg, rs.tools, plan)
			planned[id] = plan
			cat = cat.WithServer(id, entries)
		}
	}
	wave := func() {
		// A changed server's new instance may export fewer names than its old one.
		var again []string
		cat, again = p.reclaim(cat, next, order, func(string) bool { return false }, ws.Naming.ValidPattern)
		for _, id := range again {
			if _, ok := planned[id]; ok {
				planned[id] = next[id].plan
			}
		}
		settings.failed = maps.Clone(failed)
		settings.starting = maps.Clone(starting)
		seen = maps.Clone(next)
		for _, rs := range retired {
			// Their room is their successors' from the moment these are
			// published; Close, after, only drains them.
			rs.pool.Settle()
		}
		if p.commit(settings, cat, order, seen) {
			report.Changed = true
		}
		if len(startFailed) > 0 {
			p.addStartProblems(startFailed)
			startFailed = nil
		}
		for _, id := range started {
			p.resubscribe(id) // what clients subscribed to on the instances replaced
		}
		started = nil
		p.retire(retired)
		retired = nil
	}
	pending, dirty := len(todo), len(replan) > 0 || len(retired) > 0
	// rebase takes in what was committed while reloadMu was let go: a
	// relist gives a server new lists. A server this reconcile replaced,
	// or removes, keeps what it has here: the relist was of what goes.
	rebase := func() {
		cur := p.current().servers
		for id, theirs := range cur {
			was, mine := seen[id], next[id]
			if theirs == was || was == nil || mine == nil || mine.pool != theirs.pool {
				continue
			}
			plan, entries := p.plan(mine.cfg, theirs.tools, cat.WithServer(id, nil), ws.Naming.ValidPattern)
			if plan.Failed {
				continue
			}
			updated := mine.withTools(mine.cfg, theirs.tools, plan)
			updated.resources, updated.templates, updated.prompts = theirs.resources, theirs.templates, theirs.prompts
			updated.leftOut = theirs.leftOut
			next[id] = updated
			if _, ok := planned[id]; ok {
				planned[id] = plan
			}
			cat = cat.WithServer(id, entries)
			dirty = true
		}
		seen = cur
	}
	window := time.NewTimer(commitWindow)
	defer window.Stop()
	for pending > 0 {
		// Starts are waited for without reloadMu (see Reconcile).
		p.reloadMu.Unlock()
		var (
			pr    prepared
			ready bool
		)
		select {
		case pr = <-results:
			ready = true
		case <-window.C:
			window.Reset(commitWindow)
		}
		p.reloadMu.Lock()
		if ready {
			pending--
		}
		if p.closed.Load() {
			// Close took every server down, or is doing so: what started
			// since is closed here, and nothing is committed.
			if ready && pr.inst != nil {
				stale = append(stale, func() { _ = pr.inst.Close() })
			}
			if ready {
				// Stopping: the start was given up, which says nothing about
				// the server, so it is no problem to report or alert on.
				report.Abandoned = append(report.Abandoned, pr.cfg.ID)
				p.log.Info("server start abandoned: stopping", "server", pr.cfg.ID)
			}
			continue
		}
		rebase()
		if ready {
			apply(pr)
			dirty = true
		} else if dirty {
			wave()
			dirty = false
		}
	}
	if p.closed.Load() {
		// What was started and not yet committed, Close did not see.
		stale = append(stale, p.uncommitted(next, seen)...)
		report.Version = p.Version()
		return report
	}
	rebase()
	wave()
	// The problems of the servers not started here are those of their plans
	// as committed: a name one of them took back is no longer a warning.
	for id, rs := range next {
		if desired[id] && !contains(todo, id) && !replanFailed[id] {
			report.Problems = append(report.Problems, namingProblems(rs.cfg, rs.plan)...)
			report.Problems = append(report.Problems, leftOutProblems(rs.cfg, rs.leftOut)...)
		}
	}
	for _, s := range todo {
		if plan, ok := planned[s.ID]; ok {
			report.Problems = append(report.Problems, namingProblems(s, plan)...)
			report.Notes = append(report.Notes, exclusionNotes(s, plan)...)
		}
	}
	report.Version = p.Version()
	p.setProblems(report.Problems)
	return report
}

// uncommitted returns how to close the pools of next that were never
// published (committed is what was): once Close has begun, no one else will.
func (p *Proxy) uncommitted(next, committed map[string]*runningServer) []func() {
	var stops []func()
	for id, rs := range next {
		if old := committed[id]; old == nil || old.pool != rs.pool {
			stops = append(stops, func() {
				ctx, cancel := context.WithTimeout(context.Background(), closeBudget)
				defer cancel()
				rs.pool.Close(ctx)
			})
		}
	}
	return stops
}

// reclaim plans again, in config order, each server of next (but those skip
// names) that skipped tools because another owner held their names, when one
// of those names has no owner in cat any more: its owner was removed, or no
// longer exports it. It updates next and returns cat with their new entries,
// and the ids planned again. The aggregator's own tools keep the names cat
// gives them.
func (p *Proxy) reclaim(cat *catalog.Catalog, next map[string]*runningServer, order []string, skip func(string) bool, pattern string) (*catalog.Catalog, []string) {
	var again []string
	for _, id := range order {
		rs := next[id]
		if rs == nil || skip(id) || !anyFree(cat, rs.plan.Yielded) {
			continue
		}
		plan, entries := p.plan(rs.cfg, rs.tools, cat, pattern)
		if plan.Failed {
			continue // names going free cannot make a plan fail; keep what runs
		}
		next[id] = rs.withTools(rs.cfg, rs.tools, plan)
		cat = cat.WithServer(id, entries)
		again = append(again, id)
		p.log.Info("server took names that went free", "server", id, "tools", len(entries))
	}
	return cat, again
}

// anyFree reports whether one of names is owned by nobody in cat.
func anyFree(cat *catalog.Catalog, names []string) bool {
	for _, n := range names {
		if _, owned := cat.Owner(n); !owned {
			return true
		}
	}
	return false
}

// yields reports whether server exports, in cat, a name that cat gives to
// another owner.
func yields(cat *catalog.Catalog, server string) bool {
	for _, e := range cat.Server(server) {
		if owner, _ := cat.Owner(e.Exported); owner != server {
			return true
		}
	}
	return false
}

// commitWindow is how long a reload gathers ready servers before it
// commits them together.
const commitWindow = 250 * time.Millisecond

// sameRuntime reports whether two configs of a server run the same
// instances, so that a change in naming (filters, transforms, modes,
// per-tool settings, timeouts) or in how its pool hands them out (lease
// settings, ping_interval: see poolChanges) can be applied without a restart.
func sameRuntime(a, b *config.Server) bool {
	return a.Transport == b.Transport && a.Command == b.Command && slices.Equal(a.Args, b.Args) &&
		a.Cwd == b.Cwd && maps.Equal(a.Env, b.Env) && slices.Equal(a.InheritEnv, b.InheritEnv) &&
		slices.Equal(a.Withheld, b.Withheld) &&
		a.URL == b.URL && maps.Equal(a.Headers, b.Headers) && maps.Equal(a.PrincipalHeaders, b.PrincipalHeaders) &&
		a.SessionID == b.SessionID && a.Protocol == b.Protocol && a.Stateless == b.Stateless &&
		a.ConnectTimeout == b.ConnectTimeout && a.Insecure == b.Insecure && sameAuth(a.Auth, b.Auth)
}

// sameAuth reports whether two servers authorize themselves alike.
func sameAuth(a, b config.ServerAuth) bool {
	return a.Type == b.Type && a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && slices.Equal(a.Scopes, b.Scopes) &&
		a.Audience == b.Audience && a.TokenEndpoint == b.TokenEndpoint && a.Issuer == b.Issuer && a.PerUser == b.PerUser && a.Service == b.Service
}

func contains(servers []*config.Server, id string) bool {
	for _, s := range servers {
		if s.ID == id {
			return true
		}
	}
	return false
}

// commit publishes settings with the new catalog and servers and, when the
// surface changed, bumps the version and tells every client once. Callers
// hold reloadMu.
func (p *Proxy) commit(settings *state, cat *catalog.Catalog, order []string, servers map[string]*runningServer) bool {
	cat = cat.WithServer("", nil) // fresh copy we may reorder
	cat = withAdmin(cat, append(adminEntries(settings.admin), discoveryEntries(settings.discovery, cat)...))
	cat.WithOrder(append([]string{adminServer}, order...))
	cat.Render()
	old := p.current()
	next := settings.with()
	next.problems = old.problems
	next.catalog = cat
	next.servers = servers
	next.search = catalog.NextSearchView(settings.discovery, cat, old.search, adminServer, isDiscoveryTool)
	next.order = order
	next.surface = buildSurface(order, servers, settings.pattern, nil)
	p.publish(next)
	if profilesChanged(old.profiles, next.profiles) {
		p.revokeLeases(next)
	}
	resChanged, promptsChanged := catalog.ListsChanged(old.surface, next.surface)
	toolsChanged := !catalog.SameSurface(old.catalog, cat) || !catalog.SameListing(old.search, next.search)
	// Clients with a profile hear of the changes to their own view only,
	// which a profile edit alone may cause (profiles.go).
	p.announce(old, next, "resources", resChanged)
	p.announce(old, next, "prompts", promptsChanged)
	if !toolsChanged && !resChanged && !promptsChanged {
		if profilesChanged(old.profiles, next.profiles) {
			p.log.Info("profiles changed")
			p.announce(old, next, "tools", false)
		}
		return false
	}
	v := p.version.Add(1)
	if toolsChanged {
		p.log.Info("catalog changed", "version", v, "tools", cat.Len())
	} else {
		p.log.Info("resources or prompts changed", "version", v)
	}
	p.announce(old, next, "tools", toolsChanged)
	return true
}

// prepare starts every server in todo in parallel, each bounded by its
// connect_timeout (and abandoned when Supersede says so), and delivers
// each outcome as soon as it is known.
func (p *Proxy) prepare(ctx context.Context, todo []*config.Server) <-chan prepared {
	out := make(chan prepared, len(todo))
	for _, s := range todo {
		sctx, start := p.starting.begin(ctx, s)
		go func() {
			inst, err := p.start(sctx, s)
			p.starting.end(s.ID, start)
			if errors.Is(context.Cause(sctx), errSuperseded) {
				// A newer config came before the start was over: what
				// started is not what it wants.
				if inst != nil {
					go inst.Close()
				}
				inst, err = nil, errSuperseded
			}
			out <- prepared{cfg: s, inst: inst, err: err}
		}()
	}
	return out
}

// start launches one instance of s.
func (p *Proxy) start(ctx context.Context, s *config.Server) (*upstream.Instance, error) {
	timeout := s.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := p.opts.Upstream
	opts.ClientVersion = p.opts.Version
	opts.OnListChanged = func(inst *upstream.Instance, kind string) {
		p.forgetList(inst, kind)
		p.relists.request(s.ID+"/"+kind, inst, func(inst *upstream.Instance) {
			if kind == "tools" {
				p.relist(s.ID, inst)
			} else {
				p.relistSurface(s.ID, inst, kind)
			}
		})
	}
	opts.OnNotification = func(inst *upstream.Instance, n upstream.Notification) { p.upstreamNotified(s.ID, inst, n) }
	// Connecting, initializing and listing are safe to repeat, so transient
	// failures are retried with backoff within connect_timeout. A tools/call
	// is never retried: it may have reached the upstream.
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		inst, err := upstream.Start(cctx, s, opts)
		if err == nil || attempt == startAttempts || !upstream.Transient(err) || ctx.Err() != nil {
			return inst, p.scrubError(s, err) // ctx ended: abandoned, not to be retried
		}
		p.log.Warn("starting server failed; retrying", "server", s.ID, "attempt", attempt, "err", p.scrub(s, err.Error()))
		select {
		case <-cctx.Done():
			return nil, p.scrubError(s, err)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// startAttempts bounds the attempts to start a server in one reconcile.
const startAttempts = 3

func (p *Proxy) newPool(s *config.Server, first *upstream.Instance) *session.Pool {
	cfg := poolConfig(s)
	cfg.Ledger = p.ledger
	cfg.MaxLeasesPerClient = p.leasesPerClient(s)
	cfg.Connected = p.attached
	cfg.OnEvent = func(e session.Event) {
		errText := ""
		if e.Err != nil {
			errText = p.scrub(s, e.Err.Error())
		}
		p.log.Info("lease "+e.Kind, "server", e.Server, "session", sessionDigest(e.Key), "pid", e.PID, "err", errText)
		if (e.Kind == "restarted" || e.Kind == "replaced") && e.Key.IsZero() {
			p.resubscribe(e.Server) // a new shared instance took over
		}
		switch e.Kind {
		case "released", "expired", "revoked", "reclaimed":
			p.leaseEnded(e.Key) // a conversation's Session ends with its last lease
		}
		if p.opts.Observer != nil {
			p.opts.Observer.InstanceEvent(e.Server, e.Kind)
		}
	}
	return session.NewPool(cfg, func(ctx context.Context) (*upstream.Instance, error) { return p.start(ctx, s) }, first)
}

// retire lets replaced servers finish their calls, then closes them; a
// proxy Close shortens the wait.
func (p *Proxy) retire(servers []*runningServer) {
	for _, rs := range servers {
		p.retiring.Add(1)
		go func() {
			defer p.retiring.Done()
			ctx, cancel := context.WithTimeout(p.life, p.reloadDrain())
			defer cancel()
			rs.pool.Close(ctx)
		}()
	}
}

// reloadDrain is how long a retired server's calls may run (Options.ReloadDrain).
func (p *Proxy) reloadDrain() time.Duration {
	if p.opts.ReloadDrain > 0 {
		return p.opts.ReloadDrain
	}
	return drainTimeout
}

// cutByReload explains err, the failure of a request on an instance of rs,
// when a reload retired rs and closed its instances before the request
// finished: the upstream did nothing wrong, and the client should hear
// why, and whether to call again. "" otherwise.
func (p *Proxy) cutByReload(id string, rs *runningServer, err error) string {
	if !errors.Is(err, upstream.ErrClosed) || p.closed.Load() || !rs.pool.CutShort() {
		return ""
	}
	if p.current().servers[id] == nil {
		return fmt.Sprintf("server %q was removed from the config while this request ran, and its instances were closed when the request had not finished %s later; the server's tools are gone (see tools/list)", id, p.reloadDrain())
	}
	return fmt.Sprintf("server %q was changed in the config while this request ran, and its old instances were closed when the request had not finished %s later; send it again to run it on the new instance", id, p.reloadDrain())
}

// relist re-reads a server's tools after the upstream said they changed,
// and commits the result through the same path as a reload. Only an
// instance of the server's current pool may cause it: a retiring instance's
// notification is ignored.
func (p *Proxy) relist(id string, inst *upstream.Instance) {
	rs := p.current().servers[id]
	if rs == nil || !rs.pool.Owns(inst) {
		return
	}
	// The upstream is asked without reloadMu held: a slow answer must hold up
	// no reload, no other server's update and no shutdown. What it answered
	// is applied only if the instance still serves the server by then.
	ctx, cancel := context.WithTimeout(p.life, rs.cfg.ConnectTimeout)
	defer cancel()
	tools, err := inst.ListTools(ctx)
	if err != nil {
		p.log.Warn("re-listing tools after list_changed failed; keeping the previous list", "server", id, "err", p.scrub(rs.cfg, err.Error()))
		return
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	st := p.current()
	if rs = st.servers[id]; rs == nil || !rs.pool.Owns(inst) {
		return // replaced or removed meanwhile: its tools came with it
	}
	cat := st.catalog
	plan, entries := p.plan(rs.cfg, tools, cat, st.pattern)
	if plan.Failed {
		p.log.Warn("server's new tool list was rejected; keeping the previous list", "server", id, "problems", fmt.Sprint(plan.Problems))
		return
	}
	updated := rs.withTools(rs.cfg, tools, plan)
	updated.leftOut = inst.LeftOut()
	next := maps.Clone(st.servers)
	next[id] = updated
	// A name the server no longer exports goes to a tool that had to skip
	// it, in the same commit; a name it exports again stays with whoever
	// holds it now (the existing owner keeps it).
	cat, again := p.reclaim(cat.WithServer(id, entries), next, st.order, func(s string) bool { return s == id }, st.pattern)
	problems := replanned(st.problems, rs, updated)
	for _, s := range again {
		problems = replanned(problems, st.servers[s], next[s])
	}
	// Published first, so that a client told of the change by commit reads
	// the problems that go with it.
	p.setProblems(problems)
	p.commit(st, cat, st.order, next)
}

// replanned returns problems with the naming and left-out problems of old
// (a server as last committed) replaced by those of updated, the same
// server planned again.
func replanned(problems []config.Problem, old, updated *runningServer) []config.Problem {
	gone := map[config.Problem]int{}
	for _, pr := range append(namingProblems(old.cfg, old.plan), leftOutProblems(old.cfg, old.leftOut)...) {
		gone[pr]++
	}
	out := make([]config.Problem, 0, len(problems))
	for _, pr := range problems {
		if gone[pr] > 0 {
			gone[pr]--
			continue
		}
		out = append(out, pr)
	}
	out = append(out, namingProblems(updated.cfg, updated.plan)...)
	return append(out, leftOutProblems(updated.cfg, updated.leftOut)...)
}

// relistSurface re-reads a server's resources and templates, or prompts,
// after the upstream said they changed, and commits the result.
func (p *Proxy) relistSurface(id string, inst *upstream.Instance, kind string) {
	rs := p.current().servers[id]
	if rs == nil || !rs.pool.Owns(inst) {
		return
	}
	// Asked without reloadMu held, as relist does.
	ctx, cancel := context.WithTimeout(p.life, rs.cfg.ConnectTimeout)
	defer cancel()
	var (
		prompts   []upstream.Prompt
		resources []upstream.Resource
		templates []upstream.ResourceTemplate
		err       error
	)
	if kind == "prompts" {
		prompts, err = inst.ListPrompts(ctx)
	} else {
		resources, err = inst.ListResources(ctx)
		if err == nil {
			templates, err = inst.ListResourceTemplates(ctx)
		}
	}
	if err != nil {
		p.log.Warn("re-listing after list_changed failed; keeping the previous list", "server", id, "kind", kind, "err", p.scrub(rs.cfg, err.Error()))
		return
	}
	if p.keepOwnLists(rs, inst, kind, resources, templates, prompts) {
		return // the lists of the session holding inst, not the server's
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	st := p.current()
	if rs = st.servers[id]; rs == nil || !rs.pool.Owns(inst) {
		return
	}
	updated := *rs
	if kind == "prompts" {
		updated.prompts = prompts
	} else {
		updated.resources, updated.templates = resources, templates
	}
	next := maps.Clone(st.servers)
	next[id] = &updated
	p.commit(st, st.catalog.WithServer("", nil), st.order, next)
}

// setProblems publishes the problems of a reload. Callers hold reloadMu.
func (p *Proxy) setProblems(problems []config.Problem) {
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Severity > problems[j].Severity })
	next := p.current().with()
	next.problems = problems
	p.publish(next)
}

// addStartProblems publishes found, the start failures of a reconcile under
// way, among the problems of the last one, so that they show before it ends
// (which publishes its whole list); each replaces an earlier start failure
// of its server. Callers hold reloadMu.
func (p *Proxy) addStartProblems(found []config.Problem) {
	failed := map[string]bool{}
	for _, pr := range found {
		failed[pr.Server] = true
	}
	cur := p.current().problems
	problems := make([]config.Problem, 0, len(cur)+len(found))
	for _, pr := range cur {
		if !failed[pr.Server] || !strings.HasPrefix(pr.Message, startFailure) {
			problems = append(problems, pr)
		}
	}
	p.setProblems(append(problems, found...))
}

// Problems returns the problems found by the last reconcile.
func (p *Proxy) Problems() []config.Problem {
	st := p.current()
	return append(append(append([]config.Problem(nil), st.problems...), st.surface.Problems()...), p.authProblems()...)
}

// authProblems are the live problems of upstream authorization.
func (p *Proxy) authProblems() []config.Problem {
	if p.opts.AuthProblems == nil {
		return nil
	}
	return p.opts.AuthProblems()
}
