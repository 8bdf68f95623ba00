package session

import (
	"sort"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Ledger accounts for the upstream instances of every pool that shares it,
// which is every server of one aggregator: it holds the aggregator-wide
// limits (limits.max_instances, limits.max_rss) and lists each instance
// with what it serves and what it uses.
//
// What counts against limits.max_instances is a pool's slots: its shared
// instance, its spares and instances being started, its leases, and the
// instances of ended leases until they are closed. An instance being
// replaced (recycled, or over limits.max_rss) hands its slot to its
// successor at once and is listed as draining until its calls finish, and
// so do the instances of a pool being closed (its server removed or
// replaced by a reload): they must not keep the new definition of the
// server from starting its own.
type Ledger struct {
	mu     sync.Mutex
	max    int   // 0 = no limit
	maxRSS int64 // 0 = no limit
	count  int
	freed  chan struct{} // closed and replaced whenever a slot frees
	pools  map[*Pool]bool
}

// NewLedger returns a ledger without limits; SetLimits sets them.
func NewLedger() *Ledger {
	return &Ledger{freed: make(chan struct{}), pools: map[*Pool]bool{}}
}

// SetLimits applies limits.max_instances and limits.max_rss; 0 lifts
// either. Instances over a lowered limit keep running; new ones wait for
// room.
func (l *Ledger) SetLimits(maxInstances int, maxRSS int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	raised := l.max != 0 && (maxInstances == 0 || maxInstances > l.max)
	l.max, l.maxRSS = maxInstances, maxRSS
	if raised {
		l.signal()
	}
}

// MaxInstances is limits.max_instances (0: none).
func (l *Ledger) MaxInstances() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

// maxRSSBytes is limits.max_rss (0: none).
func (l *Ledger) maxRSSBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxRSS
}

// Count is how many slots are taken.
func (l *Ledger) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// take claims a slot within limits.max_instances.
func (l *Ledger) take() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.count >= l.max {
		return false
	}
	l.count++
	return true
}

// force claims a slot whatever the limit: for an instance that exists
// already (the one a server was started with).
func (l *Ledger) force() {
	l.mu.Lock()
	l.count++
	l.mu.Unlock()
}

// give frees n slots.
func (l *Ledger) give(n int) {
	if n == 0 {
		return
	}
	l.mu.Lock()
	l.count -= n
	l.signal()
	l.mu.Unlock()
}

// waitFreed returns a channel closed when a slot next frees.
func (l *Ledger) waitFreed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.freed
}

func (l *Ledger) signal() {
	close(l.freed)
	l.freed = make(chan struct{})
}

func (l *Ledger) add(p *Pool) {
	l.mu.Lock()
	l.pools[p] = true
	l.mu.Unlock()
}

func (l *Ledger) remove(p *Pool) {
	l.mu.Lock()
	delete(l.pools, p)
	l.mu.Unlock()
}

// Roles of an instance, as InstanceInfo reports them.
const (
	RoleShared   = "shared"   // serves every session of a stateless server
	RoleLeased   = "leased"   // dedicated to one session
	RoleSpare    = "spare"    // ready for the next session's lease
	RoleDraining = "draining" // replaced, released or removed: finishing its calls, then closed
)

// InstanceInfo describes one upstream instance.
type InstanceInfo struct {
	Server   string
	PID      int // 0 for remote instances
	Role     string
	Session  Key // the session a leased instance serves
	Started  time.Time
	Calls    int64 // calls handed to it
	InFlight int
	// Restarts counts the instances its holder had before it: shared
	// restarts and replacements, or a lease's lost and recycled instances.
	Restarts int
	Usage    upstream.Usage
}

// Instances lists every instance of every pool, measured now (Linux: the
// processes and resident memory of each instance's whole tree), sorted by
// server and start time.
func (l *Ledger) Instances() []InstanceInfo {
	l.mu.Lock()
	pools := make([]*Pool, 0, len(l.pools))
	for p := range l.pools {
		pools = append(pools, p)
	}
	l.mu.Unlock()
	var out []InstanceInfo
	var insts []*upstream.Instance
	for _, p := range pools {
		infos, is := p.instances()
		out, insts = append(out, infos...), append(insts, is...)
	}
	// Measured outside every lock, from one read of /proc for all.
	for i, u := range upstream.Usages(insts) {
		out[i].Usage = u
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Started.Before(out[j].Started)
	})
	return out
}
