package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Key identifies a downstream session for leasing (see proxy.LeaseKey).
type Key string

// Factory starts one new upstream instance of a server.
type Factory func(ctx context.Context) (*upstream.Instance, error)

// Config is how a Pool hands out instances.
type Config struct {
	Server       string
	Stateless    bool          // one shared instance for everyone
	IdleTTL      time.Duration // release a lease unused this long; 0 = never
	MaxInstances int           // cap on live instances; 0 = unlimited
	Prewarm      int           // spare instances kept ready
	// PingInterval is how often a shared instance is pinged; 0 = never.
	// Two failed pings in a row count as a crash.
	PingInterval time.Duration
	// OnEvent, when set, is told about lease changes for logs and tests.
	OnEvent func(Event)
}

// Restart backoff for a shared instance that died.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Event describes a lease change.
type Event struct {
	Kind   string // "leased", "released", "expired", "lost", "spawn-failed"
	Server string
	Key    Key
	PID    int
	Err    error
}

// ErrCapReached is returned when max_instances instances are all leased and
// none freed before the call's deadline.
var ErrCapReached = errors.New("lease.max_instances reached")

// drainLimit bounds how long an ended lease waits for its calls in flight.
const drainLimit = 30 * time.Second

// ErrClosed is returned by a Pool that is shutting down.
var ErrClosed = errors.New("server is being removed")

// Grant is one use of an instance for one call.
type Grant struct {
	Instance *upstream.Instance
	// First is true on a session's first lease of this server.
	First bool
	// Lost is true when the session's previous instance died and this one replaces it.
	Lost bool
	done func()
}

// Done must be called when the call finishes.
func (g *Grant) Done() { g.done() }

type lease struct {
	inst     *upstream.Instance
	inflight int
	lastUsed time.Time
	lost     bool          // the previous instance of this lease died
	idle     chan struct{} // non-nil while an ending lease waits for its calls
}

// Pool owns every instance of one server.
type Pool struct {
	cfg     Config
	factory Factory

	mu       sync.Mutex
	shared   *upstream.Instance
	sharedIn int
	spares   []*upstream.Instance
	leases   map[Key]*lease
	pending  map[Key]chan struct{} // keys whose first instance is starting
	live     int                   // instances alive or starting
	starting int                   // spares being started
	freed    chan struct{}         // closed and replaced whenever capacity frees
	closed   bool
	drained  chan struct{}
	inflight int
	stopTTL  chan struct{}
	wg       sync.WaitGroup

	// Shared instance recovery.
	down      error     // why the shared instance is down, while it is
	restartAt time.Time // when the next restart is due
}

// NewPool takes ownership of first, the instance that discovered the tools:
// it becomes the shared instance, or the first spare of a stateful server.
func NewPool(cfg Config, factory Factory, first *upstream.Instance) *Pool {
	p := &Pool{cfg: cfg, factory: factory, leases: map[Key]*lease{}, pending: map[Key]chan struct{}{},
		freed: make(chan struct{}), stopTTL: make(chan struct{})}
	if first != nil {
		p.live = 1
		if cfg.Stateless {
			p.shared = first
		} else {
			p.spares = []*upstream.Instance{first}
		}
	}
	if !cfg.Stateless {
		p.refill()
		if cfg.IdleTTL > 0 {
			go p.expireLoop()
		}
	} else if first != nil {
		p.wg.Add(1)
		go p.watchShared(first)
	}
	return p
}

// Stateless reports whether the pool shares one instance.
func (p *Pool) Stateless() bool { return p.cfg.Stateless }

// Acquire returns the instance that serves key for one call.
func (p *Pool) Acquire(ctx context.Context, key Key) (*Grant, error) {
	if p.cfg.Stateless {
		return p.acquireShared(ctx)
	}
	return p.acquireLease(ctx, key)
}

func (p *Pool) callDone() {
	p.mu.Lock()
	p.inflight--
	if p.inflight == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	p.mu.Unlock()
}

// signalFreed wakes callers waiting for capacity. Callers hold p.mu.
func (p *Pool) signalFreed() {
	close(p.freed)
	p.freed = make(chan struct{})
}

func isDead(inst *upstream.Instance) bool {
	select {
	case <-inst.Done():
		return true
	default:
		return false
	}
}

// Stats is a snapshot for status output.
type Stats struct {
	Live, Leased, Spares int
	SharedPID            int
	SharedAlive          bool
	Down                 string // why the shared instance is down, while it is
}

// Stats reports the pool's current shape.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Live: p.live, Leased: len(p.leases), Spares: len(p.spares)}
	if p.shared != nil {
		s.SharedPID = p.shared.PID()
		s.SharedAlive = !isDead(p.shared)
	}
	if p.down != nil {
		s.Down = p.down.Error()
	}
	return s
}

// Shared returns the shared instance of a stateless pool, if running.
func (p *Pool) Shared() *upstream.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shared
}

// Owns reports whether inst is one of the pool's live instances (shared,
// spare or leased); a retired or replaced instance is not.
func (p *Pool) Owns(inst *upstream.Instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.shared == inst {
		return true
	}
	for _, s := range p.spares {
		if s == inst {
			return true
		}
	}
	for _, l := range p.leases {
		if l.inst == inst {
			return true
		}
	}
	return false
}

// Close stops taking calls, waits for in-flight calls up to ctx, then closes
// every instance of the server.
func (p *Pool) Close(ctx context.Context) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stopTTL) // also stops watchShared
	var drained chan struct{}
	if p.inflight > 0 {
		drained = make(chan struct{})
		p.drained = drained
	}
	p.mu.Unlock()
	if drained != nil {
		select {
		case <-drained:
		case <-ctx.Done():
		}
	}
	p.mu.Lock()
	all := append([]*upstream.Instance(nil), p.spares...)
	if p.shared != nil {
		all = append(all, p.shared)
	}
	for _, l := range p.leases {
		all = append(all, l.inst)
	}
	p.spares, p.shared, p.leases = nil, nil, map[Key]*lease{}
	p.signalFreed()
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, inst := range all {
		wg.Add(1)
		go func() { defer wg.Done(); _ = inst.Close() }()
	}
	wg.Wait()
	p.wg.Wait()
}

func (p *Pool) emit(e Event) {
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(e)
	}
}
