package proxy

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// errSuperseded ends the start of a server that a newer config, which came
// while it was starting, removed or defines otherwise.
var errSuperseded = errors.New("a newer config no longer wants this server as it was being started")

// errClosing ends the starts under way when the proxy closes.
var errClosing = errors.New("the aggregator is stopping")

// starts are the servers a reconcile is starting, by id: the definition
// (hash) being started and how to abandon it. They are kept apart from
// reloadMu, which no one holds while a start runs.
type starts struct {
	mu     sync.Mutex
	by     map[string]*startingServer
	closed error // set by abandonAll: every start from then on is abandoned at once
}

type startingServer struct {
	hash    string
	abandon context.CancelCauseFunc
}

// begin registers the start of s and returns the context it runs under,
// and the start, for end.
func (st *starts) begin(ctx context.Context, s *config.Server) (context.Context, *startingServer) {
	ctx, cancel := context.WithCancelCause(ctx)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.by == nil {
		st.by = map[string]*startingServer{}
	}
	start := &startingServer{hash: s.Hash, abandon: cancel}
	if st.closed != nil {
		cancel(st.closed)
		return ctx, start
	}
	st.by[s.ID] = start
	return ctx, start
}

// end forgets start, the start of server id, unless a later one took its place.
func (st *starts) end(id string, start *startingServer) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.by[id] == start {
		delete(st.by, id)
	}
	start.abandon(nil) // frees the context; the start is over
}

// Supersede abandons the starts under way of the servers that ws, a config
// newer than the one being reconciled, removes or defines otherwise: the
// reconcile that started them then ends without waiting out their
// connect_timeout, and ws can be reconciled next. A server ws still defines
// alike, or whose new definition ws rejects, starts on. A nil ws (a config
// rejected whole) abandons nothing. It returns the ids abandoned, sorted.
func (p *Proxy) Supersede(ws *config.Workspace) []string {
	if ws == nil {
		return nil
	}
	wanted := map[string]string{}
	for _, s := range ws.Servers {
		wanted[s.ID] = s.Hash
	}
	for _, id := range ws.Rejected {
		wanted[id] = "" // keeps what it has; its start is left alone
	}
	p.starting.mu.Lock()
	defer p.starting.mu.Unlock()
	var abandoned []string
	for id, s := range p.starting.by {
		hash, ok := wanted[id]
		if ok && (hash == "" || hash == s.hash) {
			continue
		}
		s.abandon(errSuperseded)
		delete(p.starting.by, id)
		abandoned = append(abandoned, id)
	}
	sort.Strings(abandoned)
	return abandoned
}

// abandonAll abandons every start under way, and every one begun later,
// for cause.
func (st *starts) abandonAll(cause error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = cause
	for id, s := range st.by {
		s.abandon(cause)
		delete(st.by, id)
	}
}
