package proxy

import (
	"strings"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/policy"
)

// state is everything a request reads about the running configuration: one
// immutable value, rebuilt whole and published atomically on every commit
// (Proxy.state). Requests load it once and never lock; only the reconciler,
// under reloadMu, builds the next one.
type state struct {
	catalog  *catalog.Catalog
	surface  *catalog.Surface // resources, templates, prompts
	servers  map[string]*runningServer
	order    []string                  // servers in config order
	failed   map[string]failedServer   // servers in the config with no running instance
	starting map[string]*config.Server // servers of the config being started, none running yet
	problems []config.Problem          // from the last reload
	admin    config.Admin
	pattern  string   // naming.valid_pattern of the last good config
	required []string // servers marked required in the last good config
	limits   *limiter
	profiles map[string]*profile // by client name, and by matchKey for a match; see profiles.go
	matchers []*profile          // the profiles with a match, in the order they are tried
	policy   *policy.Set         // the policy list, compiled; nil: every call goes ahead
	rates    *rateLimits         // each principal's rate limits; nil: none
	// discovery is the config's discovery section; search is its view of
	// catalog in search mode (nil in mode all), built by the same commit.
	discovery config.Discovery
	search    *catalog.SearchView
}

func initialState() *state {
	return &state{catalog: catalog.Empty(), surface: catalog.EmptySurface(), servers: map[string]*runningServer{}, failed: map[string]failedServer{},
		admin: config.Admin{Enabled: true, LeaseReminder: true}, limits: newLimiter(0, 0)}
}

// failedServer is a server of the config that has no running instance: the
// definition it failed to start with, and why.
type failedServer struct {
	cfg *config.Server
	why string
}

// with returns a shallow copy of s for the reconciler to change; the maps
// it replaces are replaced whole, never written in place.
func (s *state) with() *state {
	n := *s
	return &n
}

// publish makes next the running state, and tells what waits for a
// commit. Callers hold reloadMu.
func (p *Proxy) publish(next *state) {
	p.state.Store(next)
	p.commits.fire()
}

// commitSignal tells who waits for the running state to change that it
// did: next is closed by the first publish after it was taken. A waiter
// takes it before it reads the state, so that no commit goes unseen, and
// never needs reloadMu. The zero value is ready.
type commitSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// next is closed by the next commit.
func (c *commitSignal) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// fire closes what next handed out.
func (c *commitSignal) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// waitsForLogin reports whether a server failed to start, why, for want of
// a shared login.
func waitsForLogin(why string) bool { return strings.Contains(why, "mcp-aggregator login") }

// anyAwaitingLogin reports whether any of servers still waits for a login
// under s, or is being started.
func (s *state) anyAwaitingLogin(servers []string) bool {
	for _, id := range servers {
		if _, ok := s.starting[id]; ok {
			return true
		}
		if f, ok := s.failed[id]; ok && waitsForLogin(f.why) {
			return true
		}
	}
	return false
}

// current is the running state.
func (p *Proxy) current() *state { return p.state.Load() }
