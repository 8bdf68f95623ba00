package tasks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// fakeClock is a table's time, moved by the test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// testTable is a task table whose owners the test names: each name is one
// session's Owner, as a Session holds it.
type testTable struct {
	*Table
	owners map[string]*Owner
}

func (tt *testTable) owner(key string) *Owner {
	if tt.owners[key] == nil {
		tt.owners[key] = &Owner{Key: session.SessionKey(identity.Principal{}, key)}
	}
	return tt.owners[key]
}

func (tt *testTable) Reserve(owner, holder string) (*Reservation, error) {
	return tt.Table.Reserve(tt.owner(owner), holder)
}

func (tt *testTable) Page(owner string, after uint64, n int) ([]*Entry, bool) {
	return tt.Table.Page(tt.owner(owner), after, n)
}

func (tt *testTable) DropSession(owner string) []*Entry {
	return tt.Table.DropSession(tt.owner(owner))
}

func newTestTable() (*testTable, *fakeClock) {
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return &testTable{Table: &Table{now: c.now}, owners: map[string]*Owner{}}, c
}

func addTask(t *testing.T, tt *testTable, owner string, inst *upstream.Instance, upID string, keep time.Duration) *Entry {
	t.Helper()
	r, err := tt.Reserve(owner, "")
	require.NoError(t, err)
	e, err := tt.Add(r, &Entry{UpstreamID: upID, Server: "s", Inst: inst, Keep: keep})
	require.NoError(t, err)
	tt.Release(r) // after add: nothing to give back
	return e
}

func TestTaskTableSameUpstreamIDsGetDistinctIDs(t *testing.T) {
	tt, _ := newTestTable()
	a, b := &upstream.Instance{}, &upstream.Instance{}
	ea := addTask(t, tt, "alice", a, "upstream-task-1", time.Minute)
	eb := addTask(t, tt, "alice", b, "upstream-task-1", time.Minute)
	assert.NotEqual(t, ea.ID, eb.ID, "two instances' task-1 are two tasks")
	assert.NotContains(t, ea.ID, "upstream-task-1", "the id says nothing of the upstream's")
	assert.True(t, strings.HasPrefix(ea.ID, "task-") && len(ea.ID) == len("task-")+2*taskIDRandomLength, ea.ID)

	got, ok := tt.ByUpstream(a, "upstream-task-1")
	require.True(t, ok)
	assert.Same(t, ea, got)
	got, ok = tt.ByUpstream(b, "upstream-task-1")
	require.True(t, ok)
	assert.Same(t, eb, got)
}

func TestTaskTableOwnership(t *testing.T) {
	tt, _ := newTestTable()
	inst := &upstream.Instance{}
	e := addTask(t, tt, "alice", inst, "u1", time.Minute)
	got, ok := tt.Lookup(tt.owner("alice").Key, e.ID)
	require.True(t, ok)
	assert.Same(t, e, got)
	_, ok = tt.Lookup(tt.owner("bob").Key, e.ID)
	assert.False(t, ok, "another session's id is not found")
	_, ok = tt.Lookup(tt.owner("alice").Key, "task-00000000000000000000000000000000")
	assert.False(t, ok)

	page, more := tt.Page("bob", 0, 10)
	assert.Empty(t, page, "bob sees none of alice's tasks")
	assert.False(t, more)

	gone := tt.DropSession("alice")
	require.Len(t, gone, 1)
	_, ok = tt.Lookup(tt.owner("alice").Key, e.ID)
	assert.False(t, ok, "a session's tasks end with it")
	assert.Zero(t, tt.Len())
	for name, o := range tt.owners {
		assert.Zero(t, o.n, "no count is left behind for %s", name)
		assert.Empty(t, o.tasks, name)
	}
}

func TestTaskTableExpiry(t *testing.T) {
	tt, clock := newTestTable()
	inst := &upstream.Instance{}
	e := addTask(t, tt, "alice", inst, "u1", KeepFor(30*time.Second, true))
	clock.t = clock.t.Add(30*time.Second + taskGrace - time.Millisecond)
	_, ok := tt.Lookup(tt.owner("alice").Key, e.ID)
	require.True(t, ok, "kept for its ttl and the grace")

	tt.Touch(e, false) // heard of again: kept from now
	assert.False(t, tt.HasEnded(e))
	clock.t = clock.t.Add(30*time.Second + taskGrace - time.Millisecond)
	_, ok = tt.Lookup(tt.owner("alice").Key, e.ID)
	require.True(t, ok)

	tt.Touch(e, true)
	tt.Touch(e, false) // once ended, ended
	assert.True(t, tt.HasEnded(e))
	clock.t = clock.t.Add(30*time.Second + taskGrace)
	_, ok = tt.ByUpstream(inst, "u1")
	assert.False(t, ok, "expired")
	_, ok = tt.Lookup(tt.owner("alice").Key, e.ID)
	assert.False(t, ok, "expired")
	assert.Zero(t, tt.Len())
}

func TestTaskTableKeep(t *testing.T) {
	assert.Equal(t, taskMaxKeep, KeepFor(0, false), "no ttl: the longest")
	assert.Equal(t, taskMaxKeep, KeepFor(48*time.Hour, true), "capped")
	assert.Equal(t, 2*time.Second+taskGrace, KeepFor(2*time.Second, true))

	d, ok := TTL([]byte(`{"ttl":60000}`))
	assert.True(t, ok)
	assert.Equal(t, time.Minute, d)
	_, ok = TTL([]byte(`{"ttl":null}`))
	assert.False(t, ok, "null is unlimited")
	_, ok = TTL([]byte(`{"ttl":-5}`))
	assert.False(t, ok)
	_, ok = TTL([]byte(`{}`))
	assert.False(t, ok)
}

func TestTaskTableBounds(t *testing.T) {
	tt, clock := newTestTable()
	inst := &upstream.Instance{}
	for i := range MaxSessionTasks {
		addTask(t, tt, "alice", inst, "u"+itoa(i), time.Minute)
	}
	_, err := tt.Reserve("alice", "")
	require.ErrorIs(t, err, errTasksFull)
	assert.Contains(t, err.Error(), "this session holds 1000 tasks")

	// Another session still has room; a reservation released gives it back.
	r, err := tt.Reserve("bob", "")
	require.NoError(t, err)
	tt.Release(r)
	tt.Release(r) // twice is once
	assert.Equal(t, 0, tt.owner("bob").n)
	assert.Zero(t, tt.pending)

	// Once they expire, alice has room again.
	clock.t = clock.t.Add(2 * time.Minute)
	r, err = tt.Reserve("alice", "")
	require.NoError(t, err)
	tt.Release(r)
	assert.Zero(t, tt.Len(), "the full table was swept")

	// The aggregator-wide cap counts reservations too.
	tt2, _ := newTestTable()
	for i := range maxTasks {
		_, err := tt2.Reserve("s"+itoa(i%(maxTasks/MaxSessionTasks+1)), "")
		require.NoError(t, err)
	}
	_, err = tt2.Reserve("another", "")
	require.ErrorIs(t, err, errTasksFull)
	assert.Contains(t, err.Error(), "the aggregator holds 10000 tasks")
}

func TestTaskTableReusedUpstreamID(t *testing.T) {
	tt, _ := newTestTable()
	inst := &upstream.Instance{}
	old := addTask(t, tt, "alice", inst, "u1", time.Minute)
	fresh := addTask(t, tt, "bob", inst, "u1", time.Minute)
	_, ok := tt.Lookup(tt.owner("alice").Key, old.ID)
	assert.False(t, ok, "an upstream id used again names the new task only")
	got, ok := tt.ByUpstream(inst, "u1")
	require.True(t, ok)
	assert.Same(t, fresh, got)
	assert.Equal(t, 0, tt.owner("alice").n)
}

func TestTaskTablePages(t *testing.T) {
	tt, _ := newTestTable()
	inst := &upstream.Instance{}
	var mine []string
	for i := range 7 {
		e := addTask(t, tt, "alice", inst, "a"+itoa(i), time.Minute)
		mine = append(mine, e.ID)
		addTask(t, tt, "bob", inst, "b"+itoa(i), time.Minute)
	}
	var seen []string
	var after uint64
	for {
		page, more := tt.Page("alice", after, 3)
		for _, e := range page {
			seen = append(seen, e.ID)
		}
		if !more {
			break
		}
		c := Cursor(page[len(page)-1].seq)
		var ok bool
		after, ok = ParseCursor(c)
		require.True(t, ok)
	}
	assert.Equal(t, mine, seen, "every task of alice's, once, in creation order")

	for _, bad := range []string{"x", "dGFza3M6", "dGFza3M6LTE", strings.Repeat("A", 100), Cursor(5) + "!"} {
		_, ok := ParseCursor(bad)
		assert.False(t, ok, "%q", bad)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestMapStringAt(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		path           []string
		ok             bool
	}{
		{"task", `{"taskId":"up-1","status":"working"}`, `{"taskId":"NEW","status":"working"}`, IDPath, true},
		{"spacing kept", "{ \"status\" : \"working\" ,\n \"taskId\" : \"up-1\" }", "{ \"status\" : \"working\" ,\n \"taskId\" : \"NEW\" }", IDPath, true},
		{"created", `{"task":{"taskId":"up-1","ttl":null},"_meta":{}}`, `{"task":{"taskId":"NEW","ttl":null},"_meta":{}}`, CreatedIDPath, true},
		{"related", `{"content":[],"_meta":{"x":1,"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`,
			`{"content":[],"_meta":{"x":1,"io.modelcontextprotocol/related-task":{"taskId":"NEW"}}}`, RelatedIDPath, true},
		{"repeated names all mapped", `{"taskId":"a","taskId":"b"}`, `{"taskId":"NEW","taskId":"NEW"}`, IDPath, true},
		{"escaped name", `{"task\u0049d":"up-1"}`, `{"task\u0049d":"NEW"}`, IDPath, true},
		{"not a string", `{"taskId":7}`, `{"taskId":7}`, IDPath, false},
		{"absent", `{"status":"working"}`, `{"status":"working"}`, IDPath, false},
		{"not an object", `["taskId"]`, `["taskId"]`, IDPath, false},
		{"invalid", `{"taskId":"up-1"`, `{"taskId":"up-1"`, IDPath, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := MapStringAt([]byte(c.in), c.path, SetString("NEW"))
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, string(got))
		})
	}
	id, ok := StringAt([]byte(`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"r"}}}`), RelatedIDPath)
	assert.True(t, ok)
	assert.Equal(t, "r", id)
	// A new id with characters JSON escapes stays valid JSON.
	got, ok := MapStringAt([]byte(`{"taskId":"x"}`), IDPath, SetString("a\"b\\c\n"))
	require.True(t, ok)
	assert.True(t, json.Valid(got), "%s", got)
}

// FuzzMapTaskID: whatever an upstream sends, mapping its task id yields
// valid JSON when it was valid, with the new id where the old one was, and
// never touches input it declines.
func FuzzMapTaskID(f *testing.F) {
	f.Add([]byte(`{"taskId":"786512e2","status":"working","ttl":60000}`))
	f.Add([]byte(`{"task":{"taskId":"t","status":"working"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}`))
	f.Add([]byte(`{"taskId":"\u0074","taskId":1}`))
	f.Add([]byte(`{"_meta":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, path := range [][]string{IDPath, CreatedIDPath, RelatedIDPath} {
			_, had := StringAt(data, path)
			out, ok := MapStringAt(data, path, SetString("task-new"))
			if !ok {
				if string(out) != string(data) {
					t.Fatalf("declined input changed: %q -> %q", data, out)
				}
				if had {
					t.Fatalf("%q has an id at %v, but it was not mapped", data, path)
				}
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("mapped %q into invalid JSON %q", data, out)
			}
			// The id a client reads (the last of repeated names) is the new one.
			if id, found := StringAt(out, path); had && (!found || id != "task-new") {
				t.Fatalf("mapped %q to %q, whose id reads %q", data, out, id)
			}
		}
	})
}

// TestTaskTableProgressEndsWithTask: the progress registration a task took
// over from its call ends when the task ends, when it is forgotten, and at
// once when it was handed over too late.
func TestTaskTableProgressEndsWithTask(t *testing.T) {
	tt, clock := newTestTable()
	inst := &upstream.Instance{}
	ended := 0
	done := func() { ended++ }

	e := addTask(t, tt, "alice", inst, "u1", time.Minute)
	require.True(t, tt.KeepProgress(e, done))
	assert.True(t, tt.Listening(e))
	tt.Touch(e, false)
	assert.Zero(t, ended, "a working task keeps its token")
	tt.Touch(e, true)
	assert.Equal(t, 1, ended, "a terminal status ends the registration")
	assert.False(t, tt.Listening(e))
	tt.Remove(e)
	assert.Equal(t, 1, ended, "ended once")

	e = addTask(t, tt, "alice", inst, "u2", time.Minute)
	require.True(t, tt.KeepProgress(e, done))
	tt.DropSession("alice")
	assert.Equal(t, 2, ended, "a forgotten task ends the registration")
	assert.False(t, tt.KeepProgress(e, done), "handed over after it was forgotten")
	assert.Equal(t, 3, ended, "and ended at once")

	e = addTask(t, tt, "bob", inst, "u3", time.Minute)
	require.True(t, tt.KeepProgress(e, done))
	clock.t = clock.t.Add(2 * time.Minute)
	assert.False(t, tt.Listening(e), "an expired task listens no more")
	assert.Equal(t, 4, ended, "and its registration ended")
}

// TestTaskTableHeldStatus: a status notification for a task not yet known
// is held while a task-augmented call runs on its instance, handed over in
// order when the task is added, and dropped when the calls end; at most
// maxHeldStatus are held per instance.
func TestTaskTableHeldStatus(t *testing.T) {
	tt, _ := newTestTable()
	inst, other := &upstream.Instance{}, &upstream.Instance{}

	_, held := tt.NoteFor(inst, "u1", "notifications/tasks/status", []byte(`{"taskId":"u1"}`))
	assert.False(t, held, "no task-augmented call runs: nothing is held")

	done := tt.Expect(inst)
	for _, status := range []string{"working", "input_required"} {
		_, held = tt.NoteFor(inst, "u1", "notifications/tasks/status", []byte(`{"taskId":"u1","status":"`+status+`"}`))
		assert.True(t, held)
	}
	_, held = tt.NoteFor(inst, "u9", "notifications/message", []byte(`{"taskId":"u9"}`))
	assert.True(t, held, "another task of the same instance")
	_, held = tt.NoteFor(other, "u1", "notifications/tasks/status", []byte(`{"taskId":"u1"}`))
	assert.False(t, held, "another instance has no call running")

	r, err := tt.Reserve("alice", "")
	require.NoError(t, err)
	var got []string
	e, err := tt.AddHeld(r, &Entry{UpstreamID: "u1", Server: "s", Inst: inst, Keep: time.Minute}, func(e *Entry, method string, params []byte) {
		got = append(got, e.UpstreamID+" "+method+" "+string(params))
	})
	require.NoError(t, err)
	assert.Equal(t, []string{`u1 notifications/tasks/status {"taskId":"u1","status":"working"}`, `u1 notifications/tasks/status {"taskId":"u1","status":"input_required"}`}, got, "in the order they came")
	found, held := tt.NoteFor(inst, "u1", "notifications/tasks/status", []byte(`{}`))
	assert.Same(t, e, found, "once added, the task's statuses go through")
	assert.False(t, held)

	done()
	assert.Empty(t, tt.held, "the last call's end drops what is still held")
	assert.Empty(t, tt.expecting)

	done = tt.Expect(inst)
	defer done()
	for i := range maxHeldStatus + 5 {
		_, held = tt.NoteFor(inst, "u5", "notifications/tasks/status", []byte(`{}`))
		assert.Equal(t, i < maxHeldStatus, held, "bounded at %d", maxHeldStatus)
	}
}

// The sessions of one client share its limitPerClient: a reservation over
// it is refused naming the client and the cap, another client still
// reserves, and a task that expires or a session that is dropped gives the
// client its place back.
func TestTaskTablePerClientShare(t *testing.T) {
	tt, clock := newTestTable()
	tt.LimitPerClient(2)
	inst := &upstream.Instance{}
	reserveAs := func(owner, holder string) (*Reservation, error) { return tt.Reserve(owner, holder) }
	r, err := reserveAs("s1", `client "alice"`)
	require.NoError(t, err)
	_, err = tt.Add(r, &Entry{UpstreamID: "u1", Server: "s", Inst: inst, Keep: time.Minute})
	require.NoError(t, err)
	r, err = reserveAs("s2", `client "alice"`)
	require.NoError(t, err)
	_, err = tt.Add(r, &Entry{UpstreamID: "u2", Server: "s", Inst: inst, Keep: 10 * time.Minute})
	require.NoError(t, err)

	_, err = reserveAs("s3", `client "alice"`)
	require.ErrorIs(t, err, errTasksFull)
	assert.Contains(t, err.Error(), `client "alice" holds its maximum of 2 tasks (--max-tasks-per-client)`)

	r, err = reserveAs("s4", `client "bob"`)
	require.NoError(t, err, "another client still reserves")
	tt.Release(r)

	clock.t = clock.t.Add(2 * time.Minute) // s1's task expires
	r, err = reserveAs("s3", `client "alice"`)
	require.NoError(t, err, "an expired task gives its place back")
	tt.Release(r)

	tt.DropSession("s2")
	r, err = reserveAs("s3", `client "alice"`)
	require.NoError(t, err)
	r2, err := reserveAs("s3", `client "alice"`)
	require.NoError(t, err, "a dropped session's tasks give their places back")
	tt.Release(r)
	tt.Release(r2)
	assert.Zero(t, tt.perClient.Held(`client "alice"`))
}
