package proxy

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
	maxSessionTasks    = 1000  // per downstream session
	taskGrace          = time.Minute
	taskMaxKeep        = 24 * time.Hour
	taskListPage       = 50 // tasks per tasks/list page
	maxTaskCursor      = 64 // bytes of a tasks/list cursor
	taskSweepEvery     = 10 * time.Second
	taskIDRandomLength = 16 // bytes of randomness in an aggregator task id
	// maxHeldStatus bounds the notifications held per instance for tasks
	// whose CreateTaskResult has not arrived yet.
	maxHeldStatus = 64
	// taskMappingWait bounds how long an upstream's request that names a
	// task not known yet waits for the CreateTaskResult that maps it.
	taskMappingWait = 10 * time.Second
)

// errTasksFull is why a task-augmented call is refused before it is sent.
var errTasksFull = errors.New("task table full")

// taskTable maps the task ids the aggregator gives its clients to the
// upstream tasks behind them: which instance of which server runs each, and
// which downstream session may see it. Two upstreams may use the same task
// id; the aggregator's ids are random and never repeat, and say nothing
// about the upstream or its id. The zero value is ready to use.
//
// The table holds the indexes that span sessions (by the aggregator's id,
// by instance and upstream id) and the overall caps; each session's own
// tasks, and their count, are on its Session (taskOwner), guarded by the
// table's mu.
type taskTable struct {
	mu   sync.Mutex
	byID map[string]*taskEntry
	byUp map[upstreamTask]*taskEntry
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
	upstreamID string
	method     string
	params     []byte
}

// taskOwner is what a downstream session owns of the task table: its tasks
// and reservations. It lives on the session's Session; every field is
// guarded by the task table's mu.
type taskOwner struct {
	key   string                // the downstream session key
	n     int                   // tasks and reservations
	tasks map[string]*taskEntry // by the aggregator's id
}

// upstreamTask names a task as its upstream knows it.
type upstreamTask struct {
	inst *upstream.Instance
	id   string
}

// taskEntry is one mapped task. Its fields other than expires never change.
type taskEntry struct {
	id         string // the aggregator's id, as clients see it
	upstreamID string
	owner      string // downstream session key
	own        *taskOwner
	holder     string // the owner's client, for the table's per-client share
	server     string
	inst       *upstream.Instance
	lease      session.Key
	// timeout bounds a tasks/result that waits for the task: the tool's
	// call timeout.
	timeout timeLimit
	seq     uint64 // creation order, for tasks/list pages
	keep    time.Duration
	expires time.Time // guarded by the table's mu
	ended   bool      // last heard of in a terminal status; guarded by the table's mu
	// progressDone ends the registration of the progress token of the call
	// that created the task, which stays valid until the task ends; nil
	// when there is none or it ended. Guarded by the table's mu.
	progressDone func()
}

func (t *taskTable) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func (t *taskTable) init() {
	if t.byID == nil {
		t.byID = map[string]*taskEntry{}
		t.byUp = map[upstreamTask]*taskEntry{}
	}
}

// keepFor is how long a task is kept after it was last heard of, given the
// ttl its upstream reported (ok false: none, or null for unlimited).
func keepFor(ttl time.Duration, ok bool) time.Duration {
	if !ok || ttl <= 0 || ttl > taskMaxKeep-taskGrace {
		return taskMaxKeep
	}
	return ttl + taskGrace
}

// limitPerClient sets how many tasks one client (fairshare.Of) may hold
// across its sessions (--max-tasks-per-client; 0: no cap of its own).
func (t *taskTable) limitPerClient(n int) {
	t.perClient.What, t.perClient.Setting = "tasks", "--max-tasks-per-client"
	t.perClient.Frees = "wait until some expire (their ttl), or end its sessions that hold tasks it no longer needs"
	t.perClient.SetMax(n)
}

// reservation is room held for one task of owner.
type reservation struct {
	owner  *taskOwner
	holder string
	ended  bool // added or released; guarded by the table's mu
}

// reserve holds room for one task of owner, a session of holder's, before
// its call is sent, so that an upstream never creates a task the table then
// has no room for. The reservation ends with add or with release.
func (t *taskTable) reserve(owner *taskOwner, holder string) (*reservation, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	t.sweepLocked(false)
	if owner.n >= maxSessionTasks || len(t.byID)+t.pending >= maxTasks || t.perClient.Full(holder) {
		t.sweepLocked(true)
	}
	switch {
	case owner.n >= maxSessionTasks:
		return nil, fmt.Errorf("%w: this session holds %d tasks, the most the aggregator keeps for one session; wait until some expire (their ttl) or use a new session", errTasksFull, maxSessionTasks)
	case t.perClient.Full(holder):
		return nil, fmt.Errorf("%w: %w", errTasksFull, t.perClient.Take(holder))
	case len(t.byID)+t.pending >= maxTasks:
		return nil, fmt.Errorf("%w: the aggregator holds %d tasks, its limit; wait until some expire (their ttl)", errTasksFull, maxTasks)
	}
	_ = t.perClient.Take(holder) // not Full, under the table's lock: it takes
	t.pending++
	owner.n++
	return &reservation{owner: owner, holder: holder}, nil
}

// release gives back a reservation that was not added; after add it does
// nothing.
func (t *taskTable) release(r *reservation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.ended {
		return
	}
	r.ended = true
	t.pending--
	t.decLocked(r.owner)
	t.perClient.Give(r.holder)
}

func (t *taskTable) decLocked(owner *taskOwner) {
	owner.n--
}

// add records e, owned by r's owner, in place of the reservation r. An
// upstream id its instance used before now names the new task.
func (t *taskTable) add(r *reservation, e *taskEntry) (*taskEntry, error) {
	return t.addHeld(r, e, nil)
}

// addHeld is add, and hands deliver, in the order they came, the status
// notifications held for the new task, before any later one can be found
// (deliver runs under the table's lock: it must only queue, and must not
// call the table).
func (t *taskTable) addHeld(r *reservation, e *taskEntry, deliver func(e *taskEntry, method string, params []byte)) (*taskEntry, error) {
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
	e.id, e.seq, e.owner, e.own, e.holder = id, t.seq, r.owner.key, r.owner, r.holder
	e.expires = t.clock().Add(e.keep)
	if old := t.byUp[upstreamTask{e.inst, e.upstreamID}]; old != nil {
		t.removeLocked(old)
	}
	// The reservation becomes the entry: the owner's count stays.
	r.ended = true
	t.pending--
	t.byID[id] = e
	if r.owner.tasks == nil {
		r.owner.tasks = map[string]*taskEntry{}
	}
	r.owner.tasks[id] = e
	t.byUp[upstreamTask{e.inst, e.upstreamID}] = e
	if list := t.held[e.inst]; len(list) > 0 {
		kept := list[:0]
		for _, h := range list {
			if h.upstreamID != e.upstreamID {
				kept = append(kept, h)
			} else if deliver != nil {
				deliver(e, h.method, h.params)
			}
		}
		clear(list[len(kept):])
		t.held[e.inst] = kept
	}
	t.changedLocked()
	return e, nil
}

// lookup finds owner's task id. Another session's task, an expired one and
// one that never was are alike: not found.
func (t *taskTable) lookup(owner, id string) (*taskEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.owner != owner {
		return nil, false
	}
	if !t.clock().Before(e.expires) {
		t.removeLocked(e)
		return nil, false
	}
	return e, true
}

// byUpstream finds the entry for a task an instance named.
func (t *taskTable) byUpstream(inst *upstream.Instance, id string) (*taskEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byUp[upstreamTask{inst, id}]
	if e == nil || !t.clock().Before(e.expires) {
		return nil, false
	}
	return e, true
}

// touch says the task was just heard of, ended (in a terminal status) or
// not: it is kept for keep from now.
func (t *taskTable) touch(e *taskEntry, ended bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] == e {
		e.expires = t.clock().Add(e.keep)
		e.ended = e.ended || ended
		if e.ended {
			e.endProgressLocked()
		}
	}
}

// endProgressLocked ends the task's progress token registration, if any.
func (e *taskEntry) endProgressLocked() {
	if e.progressDone != nil {
		e.progressDone()
		e.progressDone = nil
	}
}

// keepProgress hands e the end of its creating call's progress token
// registration, which it ends when the task ends or is forgotten; at once
// when that has already happened. It reports whether e still listens.
func (t *taskTable) keepProgress(e *taskEntry, done func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] != e || e.ended || !t.clock().Before(e.expires) {
		done()
		return false
	}
	e.progressDone = done
	return true
}

// listening reports whether progress of e's creating call is still due to
// its owner: the task is known, alive and not ended.
func (t *taskTable) listening(e *taskEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] != e || e.ended {
		return false
	}
	if !t.clock().Before(e.expires) {
		t.removeLocked(e)
		return false
	}
	return true
}

// expect says a task-augmented call runs on inst until done is called:
// status notifications for tasks not yet known are held meanwhile.
func (t *taskTable) expect(inst *upstream.Instance) (done func()) {
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
func (t *taskTable) changedLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// await finds inst's task id, waiting for its CreateTaskResult while a
// task-augmented call runs on inst, until ctx ends; false when the task is
// not known and no such call runs.
func (t *taskTable) await(ctx context.Context, inst *upstream.Instance, id string) (*taskEntry, bool) {
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

// noteFor finds the entry a notification of inst names (method, params);
// when there is none yet and a task-augmented call runs on inst, the
// notification is held (held true) for the CreateTaskResult to come.
func (t *taskTable) noteFor(inst *upstream.Instance, id, method string, params []byte) (e *taskEntry, held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byUp[upstreamTask{inst, id}]; e != nil && t.clock().Before(e.expires) {
		return e, false
	}
	if t.expecting[inst] == 0 || len(t.held[inst]) >= maxHeldStatus {
		return nil, false
	}
	t.held[inst] = append(t.held[inst], heldNote{upstreamID: id, method: method, params: append([]byte(nil), params...)})
	return nil, true
}

// hasEnded reports whether e was last heard of in a terminal status.
func (t *taskTable) hasEnded(e *taskEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.ended
}

// remove forgets a task.
func (t *taskTable) remove(e *taskEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] == e {
		t.removeLocked(e)
	}
}

func (t *taskTable) removeLocked(e *taskEntry) {
	e.endProgressLocked()
	delete(t.byID, e.id)
	delete(e.own.tasks, e.id)
	if t.byUp[upstreamTask{e.inst, e.upstreamID}] == e {
		delete(t.byUp, upstreamTask{e.inst, e.upstreamID})
	}
	t.decLocked(e.own)
	t.perClient.Give(e.holder)
}

// dropSession forgets every task of owner and returns them.
func (t *taskTable) dropSession(owner *taskOwner) []*taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*taskEntry, 0, len(owner.tasks))
	for _, e := range owner.tasks {
		out = append(out, e)
	}
	for _, e := range out {
		t.removeLocked(e)
	}
	return out
}

// page returns up to n of owner's live tasks created after the one with
// sequence number after, oldest first, and whether more follow.
func (t *taskTable) page(owner *taskOwner, after uint64, n int) ([]*taskEntry, bool) {
	if owner == nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	var mine []*taskEntry
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
func (t *taskTable) sweepLocked(force bool) {
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

// len is how many tasks the table holds.
func (t *taskTable) len() int {
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

// taskCursor renders the position after a tasks/list page. Clients treat
// it as opaque; it is the sequence number of the page's last task.
func taskCursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("tasks:" + strconv.FormatUint(seq, 10)))
}

// parseTaskCursor reads a cursor taskCursor made.
func parseTaskCursor(c string) (uint64, bool) {
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
