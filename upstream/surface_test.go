package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests below run the demo server "surface" (internal/demo/surface.go).

// big is an integer no float64 holds exactly; the surface server puts it
// wherever a decoding client would lose it.
const big = "12345678901234567890"

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestSurfaceStart(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "surface", Options{})
	ctx := testContext(t)

	t.Run("capabilities", func(t *testing.T) {
		caps := inst.Capabilities()
		assert.Equal(t, `{"completions":{},"logging":{},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true},"x-future":{"big":`+big+`}}`,
			string(caps.Raw), "Raw is the object as sent")
		caps.Raw = nil
		assert.Equal(t, Capabilities{Tools: true, ToolsListChanged: true, Resources: true, ResourcesSubscribe: true, ResourcesListChanged: true,
			Prompts: true, PromptsListChanged: true, Completions: true, Logging: true}, caps)
	})

	t.Run("every page of every list, byte for byte", func(t *testing.T) {
		resources := inst.Resources()
		require.Len(t, resources, 5, "three pages")
		for n, r := range resources {
			assert.Equal(t, fmt.Sprintf("demo://r/%d", n), r.URI)
		}
		assert.Equal(t, `{"uri":"demo://r/0","name":"r0","_meta":{"big":`+big+`}}`, string(resources[0].Raw))
		assert.Equal(t, `{"uri":"demo://r/4","name":"r4","mimeType":"text/plain"}`, string(resources[4].Raw))

		templates := inst.ResourceTemplates()
		require.Len(t, templates, 3, "two pages")
		assert.Equal(t, "demo://t/2/{id}", templates[2].URITemplate)
		assert.Equal(t, `{"uriTemplate":"demo://t/2/{id}","name":"t2"}`, string(templates[2].Raw))

		prompts := inst.Prompts()
		require.Len(t, prompts, 3, "two pages")
		assert.Equal(t, "p1", prompts[1].Name)
		assert.Equal(t, `{"name":"p1","arguments":[{"name":"a","required":true}],"_meta":{"n":`+big+`1}}`, string(prompts[1].Raw))

		assert.Len(t, inst.Tools(), 5) // ask, notify, wait, levels, meta
	})

	t.Run("listing again gives the same", func(t *testing.T) {
		resources, err := inst.ListResources(ctx)
		require.NoError(t, err)
		assert.Equal(t, inst.Resources(), resources)
		templates, err := inst.ListResourceTemplates(ctx)
		require.NoError(t, err)
		assert.Equal(t, inst.ResourceTemplates(), templates)
		prompts, err := inst.ListPrompts(ctx)
		require.NoError(t, err)
		assert.Equal(t, inst.Prompts(), prompts)
	})

	t.Run("logging/setLevel debug once at start", func(t *testing.T) {
		assert.Equal(t, []string{"debug"}, levelsSet(t, inst))
	})
}

// levelsSet asks the surface server which logging levels it was set to.
func levelsSet(t *testing.T, inst *Instance) []string {
	t.Helper()
	raw, err := inst.CallTool(testContext(t), Call{Name: "levels", Arguments: json.RawMessage(`{}`)})
	require.NoError(t, err)
	var res struct {
		Structured struct {
			Levels []string `json:"levels"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &res))
	return res.Structured.Levels
}

func TestSurfaceStartSurvivesWhatIsNotEssential(t *testing.T) {
	t.Parallel()
	t.Run("lists that fail are left empty", func(t *testing.T) {
		t.Parallel()
		rec := newLogRecorder()
		inst := startDemo(t, "surface fail-lists", Options{Logger: rec.Logger()})
		assert.Empty(t, inst.Resources())
		assert.Empty(t, inst.ResourceTemplates())
		assert.Empty(t, inst.Prompts())
		assert.Len(t, inst.Tools(), 5) // ask, notify, wait, levels, meta
		assert.Contains(t, rec.WaitFor(t, "failed to list its resources;"), "resources/list fails on this server")
		rec.WaitFor(t, "failed to list its resource templates")
		rec.WaitFor(t, "failed to list its prompts")
	})
	t.Run("no logging declared, no setLevel", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface no-logging", Options{})
		assert.False(t, inst.Capabilities().Logging)
		assert.Empty(t, levelsSet(t, inst))
	})
	t.Run("a refused setLevel is logged", func(t *testing.T) {
		t.Parallel()
		rec := newLogRecorder()
		inst := startDemo(t, "surface reject-level", Options{Logger: rec.Logger()})
		assert.Contains(t, rec.WaitFor(t, "refused logging/setLevel"), "refused by this server")
		assert.Equal(t, []string{"debug"}, levelsSet(t, inst), "asked once, not again")
	})
}

func TestDo(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "surface", Options{})
	ctx := testContext(t)

	t.Run("any method, result byte for byte", func(t *testing.T) {
		raw, err := inst.Do(ctx, Request{Method: "prompts/get", Params: json.RawMessage(`{"name":"p0","arguments":{"a":"<&>"}}`)})
		require.NoError(t, err)
		assert.Equal(t, `{"messages":[{"role":"user","content":{"type":"text","text":"prompt p0"}}]}`, string(raw))
		raw, err = inst.Do(ctx, Request{Method: "completion/complete", Params: json.RawMessage(`{"ref":{"type":"ref/prompt","name":"p0"},"argument":{"name":"a","value":"o"}}`)})
		require.NoError(t, err)
		assert.Equal(t, `{"completion":{"values":["one","two"],"total":2,"hasMore":false}}`, string(raw))
	})

	t.Run("an upstream error arrives intact", func(t *testing.T) {
		_, err := inst.Do(ctx, Request{Method: "no/such/method"})
		var rpcErr *RPCError
		require.ErrorAs(t, err, &rpcErr)
		assert.Equal(t, -32601, rpcErr.Code)
		assert.Equal(t, "method not found: no/such/method", rpcErr.Message)
	})

	t.Run("progress of any request, retokened", func(t *testing.T) {
		progress := newProgressLog()
		raw, err := inst.Do(ctx, Request{
			Method: "resources/read", Params: json.RawMessage(`{"uri":"demo://r/1","_meta":{"progressToken":"mine","k":"v"}}`),
			ProgressToken: json.RawMessage(`"mine"`), OnProgress: progress.add,
		})
		require.NoError(t, err)
		assert.Equal(t, `{"contents":[{"uri":"demo://r/1","text":"contents","_meta":{"big":`+big+`}}]}`, string(raw))
		got := progress.all()
		require.Len(t, got, 2, "every notification came before the result")
		for n, params := range got {
			assert.Equal(t, fmt.Sprintf(`{"progressToken":"mine","progress":%d,"total":2,"x":%s}`, n+1, big), string(params),
				"only the token is replaced")
		}
	})

	t.Run("a number token comes back a number", func(t *testing.T) {
		progress := newProgressLog()
		_, err := inst.Do(ctx, Request{Method: "resources/read", Params: json.RawMessage(`{"uri":"demo://r/1"}`),
			ProgressToken: json.RawMessage(big), OnProgress: progress.add})
		require.NoError(t, err)
		require.Len(t, progress.all(), 2)
		assert.True(t, strings.HasPrefix(string(progress.all()[0]), `{"progressToken":`+big+`,`))
	})

	t.Run("a request needs a method", func(t *testing.T) {
		_, err := inst.Do(ctx, Request{})
		require.Error(t, err)
	})
}

// notificationLog collects what OnNotification hands over.
type notificationLog struct {
	mu      sync.Mutex
	items   []Notification
	changed chan struct{}
}

func newNotificationLog() *notificationLog { return &notificationLog{changed: make(chan struct{})} }

func (l *notificationLog) add(_ *Instance, n Notification) {
	l.mu.Lock()
	l.items = append(l.items, n)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// waitLen returns the first n notifications, waiting for them.
func (l *notificationLog) waitLen(t *testing.T, n int) []Notification {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		l.mu.Lock()
		items, changed := append([]Notification(nil), l.items...), l.changed
		l.mu.Unlock()
		if len(items) >= n {
			return items
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d notifications within %s, want %d: %v", len(items), waitTimeout, n, items)
		}
	}
}

func TestOnNotification(t *testing.T) {
	t.Parallel()
	log := newNotificationLog()
	inst := startDemo(t, "surface", Options{OnNotification: log.add})
	ctx := testContext(t)

	sent := []string{
		`{"method":"notifications/message","params":{"level":"info","logger":"l","data":{"big":` + big + `,"s":"<&>"}}}`,
		`{"method":"notifications/progress","params":{"progressToken":"nobody's","progress":1}}`,
		`{"method":"notifications/tools/list_changed"}`,
		`{"method":"notifications/resources/list_changed","params":{}}`,
		`{"method":"notifications/prompts/list_changed"}`,
		`{"method":"notifications/tasks/status","params":{"taskId":"t1","status":"working","_meta":{}}}`,
		`{"method":"notifications/x-future"}`,
	}
	_, err := inst.CallTool(ctx, Call{Name: "notify", Arguments: json.RawMessage(`{"notifications":[` + strings.Join(sent, ",") + `]}`)})
	require.NoError(t, err)
	want := []Notification{
		{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","logger":"l","data":{"big":` + big + `,"s":"<&>"}}`)},
		{Method: "notifications/tasks/status", Params: json.RawMessage(`{"taskId":"t1","status":"working","_meta":{}}`)},
		{Method: "notifications/x-future"},
	}
	assert.Equal(t, want, log.waitLen(t, len(want)), "raw, in order, without progress and list changes")

	// A notification after the response arrives too.
	_, err = inst.Do(ctx, Request{Method: "resources/subscribe", Params: json.RawMessage(`{"uri":"demo://r/3"}`)})
	require.NoError(t, err)
	got := log.waitLen(t, len(want)+1)
	assert.Equal(t, Notification{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":"demo://r/3"}`)}, got[len(want)])
}

func TestListChangedIsCoalescedPerKind(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	running := map[string]bool{}
	var toolsRuns int
	overlap := false
	opts := Options{
		OnToolsChanged: func(*Instance) {
			mu.Lock()
			toolsRuns++
			mu.Unlock()
		},
		OnListChanged: func(_ *Instance, kind string) {
			mu.Lock()
			overlap = overlap || running[kind]
			running[kind] = true
			runs[kind]++
			n := runs[kind]
			mu.Unlock()
			if kind == "resources" && n == 1 {
				<-release // the first resources run lasts until every notification is in
			}
			mu.Lock()
			running[kind] = false
			mu.Unlock()
		},
	}
	inst := startDemo(t, "surface", opts)
	ctx := testContext(t)
	kinds := []string{"tools", "resources", "prompts"}
	settled := func(kind string) bool {
		c := inst.listChanged[kind]
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running
	}

	const repeat = 100
	_, err := inst.CallTool(ctx, Call{Name: "notify", Arguments: json.RawMessage(fmt.Sprintf(
		`{"repeat":%d,"notifications":[{"method":"notifications/resources/list_changed"},{"method":"notifications/prompts/list_changed"},{"method":"notifications/tools/list_changed"}]}`,
		repeat))})
	require.NoError(t, err)
	// Every notification has been taken (they came before the result). The
	// resources run is still held, and the other kinds do not wait for it.
	require.Eventually(t, func() bool { return settled("tools") && settled("prompts") }, waitTimeout, time.Millisecond)
	assert.False(t, settled("resources"))
	close(release)
	require.Eventually(t, func() bool { return settled("resources") }, waitTimeout, time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, runs["resources"], "the held run, and one more for everything that came meanwhile")
	for _, kind := range kinds {
		assert.GreaterOrEqual(t, runs[kind], 1, kind)
		assert.LessOrEqual(t, runs[kind], repeat, kind)
	}
	assert.Equal(t, runs["tools"], toolsRuns, "OnToolsChanged runs with OnListChanged(tools)")
	assert.False(t, overlap, "never two runs of one kind at once")
}

func TestNotify(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "surface", Options{})
	ctx := testContext(t)
	require.NoError(t, inst.Notify(ctx, "notifications/roots/list_changed", nil))
	require.NoError(t, inst.Notify(ctx, "notifications/x", json.RawMessage(`{"a":1}`)))
	require.Error(t, inst.Notify(ctx, "notifications/cancelled", json.RawMessage(`{"requestId":1}`)), "cancellation is the context's")
	require.NoError(t, inst.Ping(ctx), "the upstream took them")
}
