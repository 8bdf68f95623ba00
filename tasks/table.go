package tasks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/fairshare"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Bounds of the task table. A task is kept for its ttl (as the upstream
// granted it) after it was last heard of, plus taskGrace, and never longer
// than taskMaxKeep, which also applies to a task without a ttl.
const (
	maxTasks           = 10000 // across all sessions
	MaxSessionTasks    = 1000  // per downstream session
	taskGrace          = time.Minute
	taskMaxKeep        = 24 * time.Hour
	ListPage           = 50 // tasks per tasks/list page
	maxTaskCursor      = 64 // bytes of a tasks/list cursor
	taskSweepEvery     = 10 * time.Second
	taskIDRandomLength = 16 // bytes of randomness in an aggregator task id
	// maxHeldStatus bounds the notifications held per instance for tasks
	// whose CreateTaskResult has not arrived yet.
	maxHeldStatus = 64
	// MappingWait bounds how long an upstream's request that names a
	// task not known yet waits for the CreateTaskResult that maps it.
	MappingWait = 10 * time.Second
)

// errTasksFull is why a task-augmented call is refused before it is sent.
var errTasksFull = errors.New("task table full")

// Table maps the task ids the aggregator gives its clients to the
// upstream tasks behind them: which instance of which server runs each, and
// which downstream session may see it. Two upstreams may use the same task
// id; the aggregator's ids are random and never repeat, and say nothing
// about the upstream or its id. The zero value is ready to use.
//
// The table holds the indexes that span sessions (by the aggregator's id,
// by instance and upstream id) and the overall caps; each session's own
// tasks, and their count, are on its proxy Session (Owner), guarded by the
// table's mu.
type Table struct {
	mu   sync.Mutex
	byID map[string]*Entry
	byUp map[upstreamTask]*Entry
	// perClient counts tasks and reservations per client (fairshare.Of),
	// so that the sessions of one client cannot fill the table.
	perClient fairshare.Shares
	pending   int // reservations not yet added or released
	seq       uint64
	nextSweep time.Time
	now       func() time.Time // time.Now unless a test sets it
	// expecting counts the task-augmented calls in flight per instance;
	// while there are any, a notification about a task the table does not
	// know yet is held (up to maxHeldStatus) until its CreateTaskResult,
	// and dropped when the last of those calls ends.
	expecting map[*upstream.Instance]int
	held      map[*upstream.Instance][]heldNote
	// changed is closed, and replaced, when a task is added or a
	// task-augmented call ends: what waits for a mapping looks again.
	changed chan struct{}
}

// heldNote is a notification about a task that came before the task's
// CreateTaskResult (over HTTP, on another stream than the result, or from
// an upstream that announces a task before answering).
type heldNote struct {
	UpstreamID string
	method     string
	params     []byte
}

// Owner is what a downstream session, or a sessionless conversation, owns
// of the task table: its tasks and reservations. It lives on the proxy's
// Session; every field but Key, which never changes, is guarded by the
// task table's mu.
type Owner struct {
	// Key is the Session's: the downstream session's lease key, or the
	// principal and conversation name of sessionless requests.
	Key   session.Key
	n     int               // tasks and reservations
	tasks map[string]*Entry // by the aggregator's id
}

// Live reports whether o holds a task or a reservation that keep accepts.
func (t *Table) Live(o *Owner, keep func(*Entry) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	if o.n > len(o.tasks) {
		return true // a reservation: a call that may create a task runs
	}
	for _, e := range o.tasks {
		if now.Before(e.expires) && keep(e) {
			return true
		}
	}
	return false
}

// upstreamTask names a task as its upstream knows it.
type upstreamTask struct {
	inst *upstream.Instance
	id   string
}

// Entry is one mapped task. Its fields other than expires never change.
type Entry struct {
	ID         string // the aggregator's id, as clients see it
	UpstreamID string
	Owner      session.Key // the owning Session's key (Owner.Key)
	own        *Owner
	holder     string // the owner's client, for the table's per-client share
	Server     string
	Inst       *upstream.Instance
	Lease      session.Key
	// Timeout bounds a tasks/result that waits for the task: the tool's
	// call timeout, and TimeoutSetting the setting that set it.
	Timeout        time.Duration
	TimeoutSetting string
	seq            uint64 // creation order, for tasks/list pages
	Keep           time.Duration
	expires        time.Time // guarded by the table's mu
	ended          bool      // last heard of in a terminal status; guarded by the table's mu
	// progressDone ends the registration of the progress token of the call
	// that created the task, which stays valid until the task ends; nil
	// when there is none or it ended. Guarded by the table's mu.
	progressDone func()
}

// Seq is the task's creation order, for tasks/list cursors (Cursor).
func (e *Entry) Seq() uint64 { return e.seq }

// EndedLocked notes that e was last heard of in a terminal status when
// ended is true. Only a deliver function of AddHeld, which runs under the
// table's lock, calls it.
func (e *Entry) EndedLocked(ended bool) {
	e.ended = e.ended || ended
}

func (t *Table) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func (t *Table) init() {
	if t.byID == nil {
		t.byID = map[string]*Entry{}
		t.byUp = map[upstreamTask]*Entry{}
	}
}

// KeepFor is how long a task is kept after it was last heard of, given the
// ttl its upstream reported (ok false: none, or null for unlimited).
func KeepFor(ttl time.Duration, ok bool) time.Duration {
	if !ok || ttl <= 0 || ttl > taskMaxKeep-taskGrace {
		return taskMaxKeep
	}
	return ttl + taskGrace
}

// LimitPerClient sets how many tasks one client (fairshare.Of) may hold
// across its sessions (--max-tasks-per-client; 0: no cap of its own).
func (t *Table) LimitPerClient(n int) {
	t.perClient.What, t.perClient.Setting = "tasks", "--max-tasks-per-client"
	t.perClient.Frees = "wait until some expire (their ttl), or end its sessions that hold tasks it no longer needs"
	t.perClient.SetMax(n)
}

// Reservation is room held for one task of owner.
type Reservation struct {
	Owner  *Owner
	holder string
	ended  bool // added or released; guarded by the table's mu
}

// Reserve holds room for one task of owner, a session of holder's, before
// its call is sent, so that an upstream never creates a task the table then
// has no room for. The reservation ends with Add or with Release.
func (t *Table) Reserve(owner *Owner, holder string) (*Reservation, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	t.sweepLocked(false)
	if owner.n >= MaxSessionTasks || len(t.byID)+t.pending >= maxTasks || t.perClient.Full(holder) {
		t.sweepLocked(true)
	}
	switch {
	case owner.n >= MaxSessionTasks:
		if _, ok := owner.Key.SessionID(); !ok {
			return nil, fmt.Errorf("%w: this conversation holds %d tasks, the most the aggregator keeps for one (a session, or the principal and lease name of sessionless requests); wait until some expire (their ttl) or name a new conversation", errTasksFull, MaxSessionTasks)
		}
		return nil, fmt.Errorf("%w: this session holds %d tasks, the most the aggregator keeps for one session; wait until some expire (their ttl) or use a new session", errTasksFull, MaxSessionTasks)
	case t.perClient.Full(holder):
		return nil, fmt.Errorf("%w: %w", errTasksFull, t.perClient.Take(holder))
	case len(t.byID)+t.pending >= maxTasks:
		return nil, fmt.Errorf("%w: the aggregator holds %d tasks, its limit; wait until some expire (their ttl)", errTasksFull, maxTasks)
	}
	_ = t.perClient.Take(holder) // not Full, under the table's lock: it takes
	t.pending++
	owner.n++
	return &Reservation{Owner: owner, holder: holder}, nil
}

// Release gives back a reservation that was not added; after Add it does
// nothing.
func (t *Table) Release(r *Reservation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.ended {
		return
	}
	r.ended = true
	t.pending--
	t.decLocked(r.Owner)
	t.perClient.Give(r.holder)
}

func (t *Table) decLocked(owner *Owner) {
	owner.n--
}

// Add records e, owned by r's owner, in place of the reservation r. An
// upstream id its instance used before now names the new task.
func (t *Table) Add(r *Reservation, e *Entry) (*Entry, error) {
	return t.AddHeld(r, e, nil)
}

// AddHeld is add, and hands deliver, in the order they came, the status
// notifications held for the new task, before any later one can be found
// (deliver runs under the table's lock: it must only queue, and must not
// call the table).
func (t *Table) AddHeld(r *Reservation, e *Entry, deliver func(e *Entry, method string, params []byte)) (*Entry, error) {
	id, err := newTaskID()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.ended {
		return nil, errors.New("task reservation already ended")
	}
	t.init()
	for t.byID[id] != nil { // 128 random bits: never, but never is cheap to check
		if id, err = newTaskID(); err != nil {
			return nil, err
		}
	}
	t.seq++
	e.ID, e.seq, e.Owner, e.own, e.holder = id, t.seq, r.Owner.Key, r.Owner, r.holder
	e.expires = t.clock().Add(e.Keep)
	if old := t.byUp[upstreamTask{e.Inst, e.UpstreamID}]; old != nil {
		t.removeLocked(old)
	}
	// The reservation becomes the entry: the owner's count stays.
	r.ended = true
	t.pending--
	t.byID[id] = e
	if r.Owner.tasks == nil {
		r.Owner.tasks = map[string]*Entry{}
	}
	r.Owner.tasks[id] = e
	t.byUp[upstreamTask{e.Inst, e.UpstreamID}] = e
	if list := t.held[e.Inst]; len(list) > 0 {
		kept := list[:0]
		for _, h := range list {
			if h.UpstreamID != e.UpstreamID {
				kept = append(kept, h)
			} else if deliver != nil {
				deliver(e, h.method, h.params)
			}
		}
		clear(list[len(kept):])
		t.held[e.Inst] = kept
	}
	t.changedLocked()
	return e, nil
}

// Lookup finds owner's task id. Another session's or conversation's task,
// an expired one and one that never was are alike: not found.
func (t *Table) Lookup(owner session.Key, id string) (*Entry, bool) {
	return t.Find(id, func(k session.Key) bool { return k == owner })
}

// Find finds the task id when mine accepts its owner; otherwise, or when
// it expired or never was, it is not found.
func (t *Table) Find(id string, mine func(owner session.Key) bool) (*Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || !mine(e.Owner) {
		return nil, false
	}
	if !t.clock().Before(e.expires) {
		t.removeLocked(e)
		return nil, false
	}
	return e, true
}

// ByUpstream finds the entry for a task an instance named.
func (t *Table) ByUpstream(inst *upstream.Instance, id string) (*Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byUp[upstreamTask{inst, id}]
	if e == nil || !t.clock().Before(e.expires) {
		return nil, false
	}
	return e, true
}

// Touch says the task was just heard of, ended (in a terminal status) or
// not: it is kept for keep from now.
func (t *Table) Touch(e *Entry, ended bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.ID] == e {
		e.expires = t.clock().Add(e.Keep)
		e.ended = e.ended || ended
		if e.ended {
			e.endProgressLocked()
		}
	}
}

// endProgressLocked ends the task's progress token registration, if any.
func (e *Entry) endProgressLocked() {
	if e.progressDone != nil {
		e.progressDone()
		e.progressDone = nil
	}
}

// KeepProgress hands e the end of its creating call's progress token
// registration, which it ends when the task ends or is forgotten; at once
// when that has already happened. It reports whether e still listens.
func (t *Table) KeepProgress(e *Entry, done func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.ID] != e || e.ended || !t.clock().Before(e.expires) {
		done()
		return false
	}
	e.progressDone = done
	return true
}

// Listening reports whether progress of e's creating call is still due to
// its owner: the task is known, alive and not ended.
func (t *Table) Listening(e *Entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.ID] != e || e.ended {
		return false
	}
	if !t.clock().Before(e.expires) {
		t.removeLocked(e)
		return false
	}
	return true
}

// Expect says a task-augmented call runs on inst until done is called:
// status notifications for tasks not yet known are held meanwhile.
func (t *Table) Expect(inst *upstream.Instance) (done func()) {
	t.mu.Lock()
	if t.expecting == nil {
		t.expecting = map[*upstream.Instance]int{}
		t.held = map[*upstream.Instance][]heldNote{}
	}
	t.expecting[inst]++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.expecting[inst]--; t.expecting[inst] <= 0 {
			delete(t.expecting, inst)
			delete(t.held, inst)
		}
		t.changedLocked()
	}
}

// changedLocked wakes what waits for a mapping.
func (t *Table) changedLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// Await finds inst's task id, waiting for its CreateTaskResult while a
// task-augmented call runs on inst, until ctx ends; false when the task is
// not known and no such call runs.
func (t *Table) Await(ctx context.Context, inst *upstream.Instance, id string) (*Entry, bool) {
	for {
		t.mu.Lock()
		if e := t.byUp[upstreamTask{inst, id}]; e != nil && t.clock().Before(e.expires) {
			t.mu.Unlock()
			return e, true
		}
		if t.expecting[inst] == 0 {
			t.mu.Unlock()
			return nil, false
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		changed := t.changed
		t.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// NoteFor finds the entry a notification of inst names (method, params);
// when there is none yet and a task-augmented call runs on inst, the
// notification is held (held true) for the CreateTaskResult to come.
func (t *Table) NoteFor(inst *upstream.Instance, id, method string, params []byte) (e *Entry, held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byUp[upstreamTask{inst, id}]; e != nil && t.clock().Before(e.expires) {
		return e, false
	}
	if t.expecting[inst] == 0 || len(t.held[inst]) >= maxHeldStatus {
		return nil, false
	}
	t.held[inst] = append(t.held[inst], heldNote{UpstreamID: id, method: method, params: append([]byte(nil), params...)})
	return nil, true
}

// HasEnded reports whether e was last heard of in a terminal status.
func (t *Table) HasEnded(e *Entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.ended
}

// Remove forgets a task.
func (t *Table) Remove(e *Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.ID] == e {
		t.removeLocked(e)
	}
}

func (t *Table) removeLocked(e *Entry) {
	e.endProgressLocked()
	delete(t.byID, e.ID)
	delete(e.own.tasks, e.ID)
	if t.byUp[upstreamTask{e.Inst, e.UpstreamID}] == e {
		delete(t.byUp, upstreamTask{e.Inst, e.UpstreamID})
	}
	t.decLocked(e.own)
	t.perClient.Give(e.holder)
}

// DropSession forgets every task of owner and returns them.
func (t *Table) DropSession(owner *Owner) []*Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Entry, 0, len(owner.tasks))
	for _, e := range owner.tasks {
		out = append(out, e)
	}
	for _, e := range out {
		t.removeLocked(e)
	}
	return out
}

// Page returns up to n of owner's live tasks created after the one with
// sequence number after, oldest first, and whether more follow.
func (t *Table) Page(owner *Owner, after uint64, n int) ([]*Entry, bool) {
	if owner == nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	var mine []*Entry
	for _, e := range owner.tasks {
		if e.seq > after && now.Before(e.expires) {
			mine = append(mine, e)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].seq < mine[j].seq })
	if len(mine) > n {
		return mine[:n], true
	}
	return mine, false
}

// sweepLocked forgets expired tasks, at most every taskSweepEvery unless
// forced.
func (t *Table) sweepLocked(force bool) {
	now := t.clock()
	if !force && now.Before(t.nextSweep) {
		return
	}
	t.nextSweep = now.Add(taskSweepEvery)
	for _, e := range t.byID {
		if !now.Before(e.expires) {
			t.removeLocked(e)
		}
	}
}

// Len is how many tasks the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// newTaskID is an aggregator task id: random, so that it tells nothing
// about the upstream, its id or other sessions' tasks, and cannot be guessed.
func newTaskID() (string, error) {
	var b [taskIDRandomLength]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("task id: %w", err)
	}
	return "task-" + hex.EncodeToString(b[:]), nil
}

// Cursor renders the position after a tasks/list page. Clients treat
// it as opaque; it is the sequence number of the page's last task.
func Cursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("tasks:" + strconv.FormatUint(seq, 10)))
}

// ParseCursor reads a cursor Cursor made.
func ParseCursor(c string) (uint64, bool) {
	if len(c) > maxTaskCursor {
		return 0, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(raw) < len("tasks:")+1 || string(raw[:len("tasks:")]) != "tasks:" {
		return 0, false
	}
	seq, err := strconv.ParseUint(string(raw[len("tasks:"):]), 10, 64)
	return seq, err == nil
}
