package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/fairshare"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Factory starts one new upstream instance of a server.
type Factory func(ctx context.Context) (*upstream.Instance, error)

// Config is how a Pool hands out instances.
type Config struct {
	Server       string
	Stateless    bool          // one shared instance for everyone
	IdleTTL      time.Duration // release a lease unused this long; 0 = never
	MaxInstances int           // cap on this server's instances (lease.max_instances); 0 = unlimited
	Prewarm      int           // spare instances kept ready
	// MaxLeasesPerClient caps the leases of this server one client holds
	// at once (--max-leases-per-client), counted by the holder given to
	// AcquireAs; 0 = no cap of its own. A client at it is refused at once,
	// without queueing: only its own leases would free a place.
	MaxLeasesPerClient int
	// QueueTimeout is how long a session over a cap waits for room
	// (lease.queue_timeout); 0 refuses it at once.
	QueueTimeout time.Duration
	// MaxAge and MaxCalls recycle a leased instance between calls once it
	// is this old or has served this many calls; 0 = never.
	MaxAge   time.Duration
	MaxCalls int
	// ReclaimIdle is how long a lease must have gone unused before a new
	// session over MaxInstances may take its place (DefaultReclaimIdle
	// when 0): see reclaim.
	ReclaimIdle time.Duration
	// Connected, when set, reports whether the downstream session of a
	// lease key has an open connection or stream: of two idle leases, one
	// whose session has none is reclaimed first.
	Connected func(Key) bool
	// PingInterval is how often a shared instance is pinged; 0 = never.
	// Two failed pings in a row count as a crash.
	PingInterval time.Duration
	// UsageInterval is how often a shared instance's memory is compared
	// with the ledger's limits.max_rss (default 5s).
	UsageInterval time.Duration
	// Ledger is the aggregator-wide account every pool shares; nil gives
	// the pool one of its own, without limits.
	Ledger *Ledger
	// OnEvent, when set, is told about lease changes for logs and tests.
	OnEvent func(Event)
}

// Restart backoff for a shared instance that died.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
	// stableUptime is how long a restarted shared instance must serve for
	// its failure to count as a crash rather than as a failed start.
	stableUptime = 30 * time.Second
)

// defaultUsageInterval is how often a shared instance's RSS is checked.
const defaultUsageInterval = 5 * time.Second

// Event describes a lease change.
type Event struct {
	// Kind: "leased", "released", "expired", "session-ended", "lost",
	// "recycled" (max_age or max_calls), "replaced" (over limits.max_rss),
	// "restarted" (a shared instance after a crash, or with Key set, the
	// instance a session got in place of its lost one), "spawn-failed",
	// "spare-stopped" (lease.prewarm or lease.max_instances lowered),
	// "revoked" (the client's profile no longer admits the server),
	// "reclaimed" (idle, ended for a new session over lease.max_instances).
	Kind   string
	Server string
	Key    Key
	PID    int
	Err    error
}

// ErrCapReached is returned when lease.max_instances instances are all
// taken and no queue is configured, or none freed within it.
var ErrCapReached = errors.New("lease.max_instances reached")

// ErrLimitReached is returned when limits.max_instances instances run
// across all servers.
var ErrLimitReached = errors.New("limits.max_instances reached")

// drainLimit bounds how long a retired instance waits for its calls in flight.
const drainLimit = 30 * time.Second

// ErrSessionEnded is returned to the calls of a session that ended while
// they waited for its instance.
var ErrSessionEnded = errors.New("the session ended; initialize a new one")

// ErrClosed is returned by a Pool that is shutting down.
var ErrClosed = errors.New("server is being removed")

// Grant is one use of an instance for one call. A shared instance's calls
// are all handed one Grant, made with its record (none of its fields
// changes after that), so that a call allocates nothing to take it: a
// Grant is read, never written, by its holders.
type Grant struct {
	Instance *upstream.Instance
	// First is true on a session's first lease of this server (and after a
	// lost instance, whose replacement is a new lease in all but name), on
	// every grant until Announced says the session was told.
	First bool
	// Lost is true when the session's previous instance died and this one replaces it.
	Lost bool
	// Recycled is true when the session's previous instance was replaced
	// on purpose (lease.max_age, lease.max_calls): its state is gone.
	Recycled bool
	// Reclaimed is true, with First, on the first lease of a session whose
	// previous lease was reclaimed for another session while it went
	// unused (its state is gone), until Announced says the session was told.
	Reclaimed bool
	pool      *Pool
	rec       *record
}

// Done must be called when the call finishes.
func (g *Grant) Done() { g.pool.callDone(g.rec) }

// Announced records that the session was told it holds its lease (a tool
// result carried the reminder): later grants of the lease are not First.
func (g *Grant) Announced() {
	if g.rec == nil || g.rec.role != RoleLeased {
		return
	}
	p := g.pool
	p.mu.Lock()
	if l := g.rec.lease; l != nil && l.rec == g.rec {
		l.unannounced = false
	}
	p.mu.Unlock()
}

// record is the pool's account of one of its instances. Its fields are
// guarded by the pool's mu.
type record struct {
	inst     *upstream.Instance
	started  time.Time
	role     string
	key      Key   // the session a leased instance serves
	calls    int64 // calls handed to it
	inflight int
	restarts int
	idle     chan struct{} // while draining: closed when inflight reaches 0
	// grant is the one Grant of the calls that are told nothing (useSame):
	// every call of a shared instance, and a lease's once announced; nil
	// until the first.
	grant *Grant
	// lease is the lease a leased instance serves while it is in
	// p.leases (nil once it left), so that a call's Done finds it without
	// looking up its key.
	lease *lease
}

func newRecord(inst *upstream.Instance, role string) *record {
	return &record{inst: inst, started: time.Now(), role: role}
}

type lease struct {
	rec      *record // nil between a lost or recycled instance and the next call
	lastUsed time.Time
	lost     bool // the previous instance died; said once
	recycled bool // the previous instance was recycled; said once
	restarts int
	// unannounced: the session was not yet told it holds this lease (the
	// first call may have been a read, whose result has no room to say so);
	// grants say First until Announced.
	unannounced bool
	// reclaimed: the session's lease before this one was reclaimed
	// (reclaim.go); grants say Reclaimed while unannounced.
	reclaimed bool
	// holder is who the lease counts against for MaxLeasesPerClient.
	holder string
	// owner is what the lease's last call said of who made it (Claim.Owner),
	// for Revoke to judge; nil when none did.
	owner any
}

// Pool owns every instance of one server.
type Pool struct {
	cfg     Config
	factory Factory
	ledger  *Ledger

	mu     sync.Mutex
	shared *record
	spares []*record
	leases map[Key]*lease
	// perClient counts each holder's leases, and new ones being filled.
	perClient fairshare.Shares
	draining  map[*record]bool      // retired instances, until closed
	pending   map[Key]chan struct{} // keys whose instance is starting
	// acquiring counts the Acquire calls of each key under way; ended
	// marks keys whose session ended while one was, so that none of them
	// leases an instance to a session that is gone.
	acquiring map[Key]int
	// waiting counts the Acquire calls waiting at a cap (lease.max_instances,
	// limits.max_instances) for room to lease.
	waiting int
	ended   map[Key]bool
	// reclaimed marks the keys whose lease was reclaimed (reclaim.go),
	// with when, until their session is told or ends.
	reclaimed map[Key]time.Time
	// afterIdleScan, if set, runs between expire's look for idle leases
	// and their end (tests).
	afterIdleScan func()
	live          int           // slots held (see Ledger)
	starting      int           // spares being started
	freed         chan struct{} // closed and replaced whenever a slot frees
	closed        bool
	settled       bool // Settle or Close gave every slot back to the ledger
	drained       chan struct{}
	cut           bool // Close closed the instances before their calls finished
	inflight      int
	stopTTL       chan struct{}
	// tuned is closed and replaced whenever Adjust changes the settings:
	// the loops that time themselves by them look again.
	tuned chan struct{}
	looks int           // times such a loop read the settings (tests wait for it)
	stop  chan struct{} // closed by Close: retired instances stop waiting for calls
	// life is cancelled when Close begins: instances still starting (a
	// spare, a shared restart, a lease's) are abandoned and killed rather
	// than waited for.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup
	// Shared instance recovery.
	down      error     // why the shared instance is down, while it is
	restartAt time.Time // when the next restart is due
}

// NewPool takes ownership of first, the instance that discovered the tools:
// it becomes the shared instance, or the first spare of a stateful server.
// first counts against limits.max_instances even over it: it runs already.
func NewPool(cfg Config, factory Factory, first *upstream.Instance) *Pool {
	if cfg.Ledger == nil {
		cfg.Ledger = NewLedger()
	}
	if cfg.UsageInterval <= 0 {
		cfg.UsageInterval = defaultUsageInterval
	}
	if cfg.ReclaimIdle <= 0 {
		cfg.ReclaimIdle = DefaultReclaimIdle
	}
	p := &Pool{cfg: cfg, factory: factory, ledger: cfg.Ledger, leases: map[Key]*lease{}, draining: map[*record]bool{},
		pending: map[Key]chan struct{}{}, acquiring: map[Key]int{}, ended: map[Key]bool{}, reclaimed: map[Key]time.Time{}, freed: make(chan struct{}), stopTTL: make(chan struct{}), stop: make(chan struct{}), tuned: make(chan struct{})}
	p.life, p.endLife = context.WithCancel(context.Background())
	p.perClient.What = fmt.Sprintf("leased instances of server %q", cfg.Server)
	p.perClient.Setting = "--max-leases-per-client"
	p.perClient.Frees = "release one with mcp_release (a lease also ends with its session, or after lease.idle_ttl unused)"
	p.perClient.SetMax(cfg.MaxLeasesPerClient)
	p.ledger.add(p)
	if first != nil {
		p.live = 1
		p.ledger.force()
		if cfg.Stateless {
			p.shared = newRecord(first, RoleShared)
		} else {
			p.spares = []*record{newRecord(first, RoleSpare)}
		}
	}
	if !cfg.Stateless {
		p.refill()
		go p.expireLoop() // idle; Adjust may set idle_ttl or max_age later
	} else if first != nil {
		p.wg.Add(1)
		go p.watchShared(p.shared)
	}
	return p
}

// Stateless reports whether the pool shares one instance.
func (p *Pool) Stateless() bool { return p.cfg.Stateless }

// Acquire returns the instance that serves key for one call.
func (p *Pool) Acquire(ctx context.Context, key Key) (*Grant, error) {
	return p.AcquireAs(ctx, key, "")
}

// AcquireAs is Acquire for a call of holder (fairshare.Of): a new lease
// counts against holder's MaxLeasesPerClient until it ends.
func (p *Pool) AcquireAs(ctx context.Context, key Key, holder string) (*Grant, error) {
	return p.AcquireFor(ctx, key, Claim{Holder: holder})
}

// Claim is what a call says of itself as it acquires an instance of a
// stateful server, for the lease it uses or starts: whom a new lease
// counts against, who holds the lease now, and the host an instance
// started for it serves. A call of a stateless server needs none of it,
// and a call whose lease serves it as it is needs neither Holder nor Host:
// they go into the context of a start only when one may come.
type Claim struct {
	// Holder is who a new lease counts against for MaxLeasesPerClient
	// (fairshare.Of); "" for none.
	Holder string
	// Owner is who makes the call: the lease keeps the owner its latest
	// call named, which Revoke gives back, so that who decides which
	// leases to end can judge a lease by who holds it now (a caller's
	// claims, the view it came to), more than its key tells. The pool
	// never looks inside it. nil: the lease keeps the owner it has.
	Owner any
	// Host, with ForHost set, are the capabilities of the host the lease
	// serves: an instance started for it declares the host's own settings
	// of the extensions the aggregator carries, and a spare serves it only
	// if it suits (upstream.ForHost, upstream.Suits). Without ForHost any
	// instance suits.
	Host    json.RawMessage
	ForHost bool
}

// AcquireFor is Acquire for a call that claims c.
func (p *Pool) AcquireFor(ctx context.Context, key Key, c Claim) (*Grant, error) {
	if p.cfg.Stateless {
		return p.acquireShared(ctx)
	}
	return p.acquireLease(ctx, key, c)
}

// TryAcquireFor is AcquireFor for a caller that may not wait: a shared
// instance is granted or refused at once as AcquireFor would; a lease is
// granted only when its instance serves as it is. ok is false, having
// done nothing, when the call would have to wait (a lease to start, to
// reclaim or to wait room for): the caller then calls AcquireFor.
func (p *Pool) TryAcquireFor(key Key, c Claim) (g *Grant, err error, ok bool) {
	if p.cfg.Stateless {
		g, err = p.acquireShared(context.Background())
		return g, err, true
	}
	p.mu.Lock()
	g = p.useLease(key, c.Owner)
	p.mu.Unlock()
	return g, nil, g != nil
}

// use hands rec out for one call. Callers hold mu.
func (p *Pool) use(rec *record) *Grant {
	rec.calls++
	rec.inflight++
	p.inflight++
	return &Grant{Instance: rec.inst, pool: p, rec: rec}
}

// useSame is use for a call that is told nothing of rec (a shared
// instance's, or a lease's that serves as it is and was announced): such
// calls all get rec's one Grant, none of whose fields is set per call.
// Callers hold mu.
func (p *Pool) useSame(rec *record) *Grant {
	rec.calls++
	rec.inflight++
	p.inflight++
	if rec.grant == nil {
		rec.grant = &Grant{Instance: rec.inst, pool: p, rec: rec}
	}
	return rec.grant
}

func (p *Pool) callDone(rec *record) {
	p.mu.Lock()
	rec.inflight--
	p.inflight--
	if rec.inflight == 0 && rec.idle != nil {
		close(rec.idle)
		rec.idle = nil
	}
	if p.inflight == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	var recycled *record
	if rec.role == RoleLeased {
		if l := rec.lease; l != nil && l.rec == rec {
			l.lastUsed = time.Now()
			if rec.inflight == 0 && p.due(rec) {
				// Recycled now, while nothing runs on it; the session's
				// next call gets a fresh instance.
				l.rec, l.recycled = nil, true
				recycled = rec
			}
		}
	}
	p.mu.Unlock()
	if recycled != nil {
		p.retire(recycled, false, "recycled")
	}
}

// due reports whether a leased instance has reached lease.max_calls or
// lease.max_age. Callers hold mu.
func (p *Pool) due(rec *record) bool {
	return (p.cfg.MaxCalls > 0 && rec.calls >= int64(p.cfg.MaxCalls)) ||
		(p.cfg.MaxAge > 0 && time.Since(rec.started) >= p.cfg.MaxAge)
}

// takeSlot claims room for one more instance within lease.max_instances
// and limits.max_instances. Callers hold mu.
func (p *Pool) takeSlot() error {
	if !p.cfg.Stateless && p.cfg.MaxInstances > 0 && p.live >= p.cfg.MaxInstances {
		return ErrCapReached
	}
	if !p.ledger.take() {
		return ErrLimitReached
	}
	p.live++
	return nil
}

// overCap reports whether the pool runs more instances than
// lease.max_instances allows (it was lowered). Callers hold mu.
func (p *Pool) overCap() bool {
	return !p.cfg.Stateless && p.cfg.MaxInstances > 0 && p.live > p.cfg.MaxInstances
}

// freeSlot gives a slot back. Callers hold mu. Once Close has given back
// every slot, a late one (an instance retired as Close ran) was among them.
func (p *Pool) freeSlot() {
	if p.settled {
		return
	}
	p.live--
	p.ledger.give(1)
	p.signalFreed()
}

// retire takes rec out of service: it drains (its calls in flight finish,
// bounded by drainLimit and by Close), is closed, and then, with freeSlot,
// gives its slot back.
func (p *Pool) retire(rec *record, freeSlot bool, why string) {
	p.mu.Lock()
	rec.role = RoleDraining
	p.draining[rec] = true
	var idle chan struct{}
	if rec.inflight > 0 {
		idle = make(chan struct{})
		rec.idle = idle
	}
	// Added under mu, so that it is ordered before Close's Wait.
	p.wg.Add(1)
	p.mu.Unlock()
	if why != "" {
		p.emit(Event{Kind: why, Server: p.cfg.Server, Key: rec.key, PID: rec.inst.PID(), Err: deadErr(rec.inst)})
	}
	go func() {
		defer p.wg.Done()
		if idle != nil {
			timer := time.NewTimer(drainLimit)
			select {
			case <-idle:
			case <-p.stop:
			case <-timer.C:
			}
			timer.Stop()
		}
		_ = rec.inst.Close()
		p.mu.Lock()
		delete(p.draining, rec)
		if freeSlot {
			p.freeSlot()
		}
		p.mu.Unlock()
		if freeSlot {
			p.refill()
		}
	}()
}

// deadErr is why inst died, or nil while it runs.
func deadErr(inst *upstream.Instance) error {
	if isDead(inst) {
		return inst.Err()
	}
	return nil
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
	Draining             int // retired instances not yet closed
	// Waiting is the sessions' calls waiting at a cap (lease.max_instances,
	// limits.max_instances) for an instance to lease.
	Waiting     int
	SharedPID   int
	SharedAlive bool
	Down        string // why the shared instance is down, while it is
}

// Stats reports the pool's current shape.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Live: p.live, Leased: len(p.leases), Spares: len(p.spares), Draining: len(p.draining), Waiting: p.waiting}
	if p.shared != nil {
		s.SharedPID = p.shared.inst.PID()
		s.SharedAlive = !isDead(p.shared.inst)
	}
	if p.down != nil {
		s.Down = p.down.Error()
	}
	return s
}

// instances describes the pool's instances, without measuring them.
func (p *Pool) instances() ([]InstanceInfo, []*upstream.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var recs []*record
	if p.shared != nil {
		recs = append(recs, p.shared)
	}
	recs = append(recs, p.spares...)
	for _, l := range p.leases {
		if l.rec != nil {
			recs = append(recs, l.rec)
		}
	}
	for r := range p.draining {
		recs = append(recs, r)
	}
	infos := make([]InstanceInfo, 0, len(recs))
	insts := make([]*upstream.Instance, 0, len(recs))
	for _, r := range recs {
		infos = append(infos, InstanceInfo{Server: p.cfg.Server, PID: r.inst.PID(), Role: r.role, Session: r.key,
			Started: r.started, Calls: r.calls, InFlight: r.inflight, Restarts: r.restarts})
		insts = append(insts, r.inst)
	}
	return infos, insts
}

// Shared returns the shared instance of a stateless pool, if running.
func (p *Pool) Shared() *upstream.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shared == nil {
		return nil
	}
	return p.shared.inst
}

// Owns reports whether inst is one of the pool's live instances (shared,
// spare or leased); a retired or replaced instance is not.
func (p *Pool) Owns(inst *upstream.Instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.shared != nil && p.shared.inst == inst {
		return true
	}
	for _, s := range p.spares {
		if s.inst == inst {
			return true
		}
	}
	for _, l := range p.leases {
		if l.rec != nil && l.rec.inst == inst {
			return true
		}
	}
	return false
}

// CutShort reports whether Close closed the pool's instances while calls
// still ran on them, because its ctx ended first: those calls fail for
// that, not for anything their upstream did.
func (p *Pool) CutShort() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
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
	p.endLife()      // and every start under way
	// From now on its instances only finish their calls: they give their
	// slots back at once, as a recycled instance does, so that the server's
	// new definition after a reload, or another server, may start
	// instances beside them. (A slot taken while Close runs is given back
	// at its end.)
	p.settleLocked()
	// Every instance now only finishes its calls, and is listed so: a
	// shared instance of a server a reload replaced is not counted as
	// serving beside its successor.
	if p.shared != nil {
		p.shared.role = RoleDraining
	}
	for _, s := range p.spares {
		s.role = RoleDraining
	}
	for _, l := range p.leases {
		if l.rec != nil {
			l.rec.role = RoleDraining
		}
	}
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
			p.mu.Lock()
			p.cut = p.inflight > 0
			p.mu.Unlock()
		}
	}
	close(p.stop)
	p.mu.Lock()
	var all []*upstream.Instance
	for _, s := range p.spares {
		all = append(all, s.inst)
	}
	if p.shared != nil {
		all = append(all, p.shared.inst)
	}
	for _, l := range p.leases {
		if l.rec != nil {
			all = append(all, l.rec.inst)
		}
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
	p.mu.Lock()
	p.ledger.give(p.live)
	p.live = 0
	p.mu.Unlock()
	p.ledger.remove(p)
}

// Settle gives back to the ledger, at once, the slots of every instance
// the pool runs, as Close does first: a reload settles the pool of a
// server it replaces or removes before the new state is published, so that
// the calls that reach the server's new definition at once find the room
// under limits.max_instances that the old instances held, rather than
// racing the Close that follows. The pool serves on until Close; an
// instance it starts meanwhile takes a slot, given back when it closes.
func (p *Pool) Settle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settleLocked()
}

// settleLocked gives back the slots held. Callers hold mu.
func (p *Pool) settleLocked() {
	p.ledger.give(p.live)
	p.live, p.settled = 0, true
}

// startCtx is ctx, cancelled also when the pool closes, for starting an
// instance on a caller's behalf.
func (p *Pool) startCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.life, func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

func (p *Pool) emit(e Event) {
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(e)
	}
}
