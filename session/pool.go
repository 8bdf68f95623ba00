package session

import (
	"context"
	"errors"
	"fmt"
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

func (p *Pool) acquireShared(ctx context.Context) (*Grant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.shared == nil || isDead(p.shared) {
		if p.down == nil || p.restartAt.IsZero() {
			return nil, fmt.Errorf("server %q is down; it is being restarted", p.cfg.Server)
		}
		wait := max(time.Until(p.restartAt), 0).Round(time.Millisecond)
		return nil, fmt.Errorf("server %q is down (%v); restarting in %s", p.cfg.Server, p.down, wait)
	}
	p.inflight++
	return &Grant{Instance: p.shared, done: p.callDone}, nil
}

// watchShared supervises the shared instance: when it dies or stops
// answering pings it is replaced, with capped exponential backoff between
// failed starts. Calls made while it is down fail at once with the reason.
func (p *Pool) watchShared(inst *upstream.Instance) {
	defer p.wg.Done()
	backoff := minBackoff
	for {
		reason := p.supervise(inst)
		p.mu.Lock()
		closing := p.closed
		p.mu.Unlock()
		if reason == nil || closing {
			return
		}
		// Down first, so no call reaches the lost instance and status stops
		// calling it healthy; then close it without holding up the restart
		// (a hung process takes the whole shutdown sequence).
		p.mu.Lock()
		if p.shared == inst {
			p.shared, p.down, p.restartAt = nil, reason, time.Now().Add(backoff)
		}
		p.mu.Unlock()
		p.emit(Event{Kind: "lost", Server: p.cfg.Server, PID: inst.PID(), Err: reason})
		p.wg.Add(1)
		go func(lost *upstream.Instance) { defer p.wg.Done(); _ = lost.Close() }(inst)
		for {
			p.mu.Lock()
			p.shared, p.down, p.restartAt = nil, reason, time.Now().Add(backoff)
			p.mu.Unlock()
			select {
			case <-p.stopTTL:
				return
			case <-time.After(backoff):
			}
			fresh, err := p.factory(context.Background())
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				if fresh != nil {
					_ = fresh.Close()
				}
				return
			}
			if err == nil {
				p.shared, p.down = fresh, nil
				p.mu.Unlock()
				p.emit(Event{Kind: "restarted", Server: p.cfg.Server, PID: fresh.PID()})
				inst, backoff = fresh, minBackoff
				break
			}
			p.mu.Unlock()
			reason = err
			p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// supervise waits until inst dies or fails two pings in a row (returning
// why), or the pool closes (returning nil).
func (p *Pool) supervise(inst *upstream.Instance) error {
	var tick <-chan time.Time
	if p.cfg.PingInterval > 0 {
		t := time.NewTicker(p.cfg.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	failures := 0
	for {
		select {
		case <-p.stopTTL:
			return nil
		case <-inst.Done():
			if err := inst.Err(); err != nil {
				return err
			}
			return errors.New("the connection closed")
		case <-tick:
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.PingInterval)
			err := inst.Ping(ctx)
			cancel()
			if err == nil {
				failures = 0
				continue
			}
			if failures++; failures >= 2 {
				return fmt.Errorf("no answer to two pings in a row: %w", err)
			}
		}
	}
}

func (p *Pool) acquireLease(ctx context.Context, key Key) (*Grant, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		l := p.leases[key]
		if l != nil && isDead(l.inst) {
			// The session's instance died: its state is gone. Hand out a
			// fresh one and say so in the result.
			lostEvent := Event{Kind: "lost", Server: p.cfg.Server, Key: key, PID: l.inst.PID(), Err: l.inst.Err()}
			delete(p.leases, key)
			p.live--
			p.signalFreed()
			p.mu.Unlock()
			p.emit(lostEvent)
			g, err := p.newLease(ctx, key, true)
			if err != nil || g != nil {
				return g, err
			}
			continue
		}
		if l != nil {
			l.inflight++
			l.lastUsed = time.Now()
			p.inflight++
			p.mu.Unlock()
			return &Grant{Instance: l.inst, done: p.leaseDone(key, l)}, nil
		}
		p.mu.Unlock()
		g, err := p.newLease(ctx, key, false)
		if err != nil || g != nil {
			return g, err
		}
	}
}

// newLease gives key a spare or a new instance, waiting for capacity under
// the cap. A nil Grant with nil error means "look again".
func (p *Pool) newLease(ctx context.Context, key Key, lost bool) (*Grant, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.leases[key] != nil {
		p.mu.Unlock()
		return nil, nil
	}
	// Concurrent first calls of one session share the one instance the
	// first of them starts.
	if wait, starting := p.pending[key]; starting {
		p.mu.Unlock()
		select {
		case <-wait:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("server %q: waiting for this session's instance to start: %w", p.cfg.Server, context.Cause(ctx))
		}
	}
	mine := make(chan struct{})
	p.pending[key] = mine
	defer func() {
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		close(mine)
	}()
	var inst *upstream.Instance
	for len(p.spares) > 0 && inst == nil {
		inst = p.spares[0]
		p.spares = p.spares[1:]
		if isDead(inst) {
			inst = nil
			p.live--
		}
	}
	if inst == nil {
		if p.cfg.MaxInstances > 0 && p.live >= p.cfg.MaxInstances {
			freed := p.freed
			p.mu.Unlock()
			select {
			case <-freed:
				return nil, nil
			case <-ctx.Done():
				return nil, fmt.Errorf("server %q: %w (%d instances, all leased to other sessions); raise lease.max_instances or ask agents to call mcp_release: %w",
					p.cfg.Server, ErrCapReached, p.cfg.MaxInstances, context.Cause(ctx))
			}
		}
		p.live++
		p.mu.Unlock()
		fresh, err := p.factory(ctx)
		p.mu.Lock()
		if err != nil {
			p.live--
			p.signalFreed()
			p.mu.Unlock()
			return nil, err
		}
		inst = fresh
		if p.closed {
			p.live--
			p.mu.Unlock()
			_ = inst.Close()
			return nil, ErrClosed
		}
	}
	l := &lease{inst: inst, inflight: 1, lastUsed: time.Now(), lost: lost}
	p.leases[key] = l
	p.inflight++
	p.mu.Unlock()
	p.emit(Event{Kind: "leased", Server: p.cfg.Server, Key: key, PID: inst.PID()})
	p.refill()
	return &Grant{Instance: inst, First: true, Lost: lost, done: p.leaseDone(key, l)}, nil
}

func (p *Pool) leaseDone(key Key, l *lease) func() {
	return func() {
		p.mu.Lock()
		l.inflight--
		l.lastUsed = time.Now()
		if l.inflight == 0 && l.idle != nil {
			close(l.idle)
			l.idle = nil
		}
		p.mu.Unlock()
		p.callDone()
	}
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

// Release ends key's lease, if any, and stops its instance once its calls
// finish. It reports whether there was a lease.
func (p *Pool) Release(key Key) bool {
	return p.end(key, "released")
}

func (p *Pool) end(key Key, why string) bool {
	p.mu.Lock()
	l := p.leases[key]
	if l == nil {
		p.mu.Unlock()
		return false
	}
	delete(p.leases, key)
	var idle chan struct{}
	if l.inflight > 0 {
		idle = make(chan struct{})
		l.idle = idle
	}
	p.mu.Unlock()
	p.emit(Event{Kind: why, Server: p.cfg.Server, Key: key, PID: l.inst.PID()})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if idle != nil {
			// The session's calls still running finish first.
			select {
			case <-idle:
			case <-time.After(drainLimit):
			}
		}
		_ = l.inst.Close()
		p.mu.Lock()
		p.live--
		p.signalFreed()
		p.mu.Unlock()
		p.refill()
	}()
	return true
}

// Held reports whether key holds a lease, and its instance's pid.
func (p *Pool) Held(key Key) (pid int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.leases[key]; l != nil {
		return l.inst.PID(), true
	}
	return 0, false
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

// refill starts spares until prewarm are ready or starting, within the cap.
func (p *Pool) refill() {
	if p.cfg.Stateless {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.spares)+p.starting < p.cfg.Prewarm &&
		(p.cfg.MaxInstances == 0 || p.live < p.cfg.MaxInstances) {
		p.live++
		p.starting++
		p.wg.Add(1)
		go p.startSpare()
	}
}

func (p *Pool) startSpare() {
	defer p.wg.Done()
	inst, err := p.factory(context.Background())
	p.mu.Lock()
	p.starting--
	if err != nil || p.closed {
		p.live--
		p.signalFreed()
		p.mu.Unlock()
		if err != nil {
			p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
		} else {
			_ = inst.Close()
		}
		return
	}
	p.spares = append(p.spares, inst)
	p.signalFreed() // a caller waiting under the cap can take it
	p.mu.Unlock()
}

func (p *Pool) expireLoop() {
	period := p.cfg.IdleTTL / 4
	if period < 10*time.Millisecond {
		period = 10 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.stopTTL:
			return
		case now := <-t.C:
			var idle []Key
			p.mu.Lock()
			for k, l := range p.leases {
				if l.inflight == 0 && now.Sub(l.lastUsed) >= p.cfg.IdleTTL {
					idle = append(idle, k)
				}
			}
			p.mu.Unlock()
			for _, k := range idle {
				p.end(k, "expired")
			}
		}
	}
}

// EndSession ends key's lease because the downstream session ended.
func (p *Pool) EndSession(key Key) { p.end(key, "session-ended") }

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
