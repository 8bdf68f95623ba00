package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// askedRequest is one request an upstream sent the client, params as received.
type askedRequest struct {
	Method string
	Params any
}

// everythingPeer is a client of server-everything, direct or through the
// aggregator, that declares sampling, elicitation and roots and answers
// them the same way either way, recording what it was asked.
type everythingPeer struct {
	c     *client
	mu    sync.Mutex
	asked []askedRequest
}

func newEverythingPeer(t *testing.T, c *client) *everythingPeer {
	p := &everythingPeer{c: c}
	c.inbox.onRequest = func(method string, params json.RawMessage) (string, string) {
		p.mu.Lock()
		p.asked = append(p.asked, askedRequest{method, decodeParams(params)})
		p.mu.Unlock()
		switch method {
		case "sampling/createMessage":
			return `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m-1","stopReason":"endTurn","_meta":{"com.example/cost":12345678901234567890}}`, ""
		case "elicitation/create":
			return `{"action":"accept","content":{"name":"Ada","check":true,"firstLine":"x","email":"ada@example.com","homepage":"https://example.com","birthdate":"1815-12-10","integer":7,"number":2.5,"untitledSingleSelectEnum":"Option 1","untitledMultipleSelectEnum":["Option 1"],"titledSingleSelectEnum":"Option 1","titledMultipleSelectEnum":["Option 1"],"legacyTitledEnum":"Option 1"}}`, ""
		case "roots/list":
			return `{"roots":[{"uri":"file:///work/a","name":"a","_meta":{"k":[1]}},{"uri":"file:///work/b"}]}`, ""
		}
		return "", `{"code":-32601,"message":"not implemented: ` + method + `"}`
	}
	c.initializeWith(map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{"form": map[string]any{}},
		"roots": map[string]any{"listChanged": true}})
	return p
}

// decodeParams decodes params as decodeJSON does, without failing a test
// from the goroutine that answers the server: nil when there are none.
func decodeParams(params json.RawMessage) any {
	if len(params) == 0 {
		return nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(params))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "invalid JSON: " + string(params)
	}
	return v
}

// clockTime is how server-everything's dynamic resources say when they
// were made.
var clockTime = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2}\s?[AP]M`)

// withoutClockTimes returns v with the clock times in its strings, and in
// its base64 blobs, replaced: the two reads of a dynamic resource need not
// fall in the same second.
func withoutClockTimes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if b, ok := e.(string); ok && k == "blob" {
				if raw, err := base64.StdEncoding.DecodeString(b); err == nil {
					out[k] = base64.StdEncoding.EncodeToString(clockTime.ReplaceAll(raw, []byte("TIME")))
					continue
				}
			}
			out[k] = withoutClockTimes(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutClockTimes(e)
		}
		return out
	case string:
		return clockTime.ReplaceAllString(x, "TIME")
	}
	return v
}

// askedSince returns the requests the peer was asked after the first n.
func (p *everythingPeer) askedSince(n int) []askedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked[n:])
}

func (p *everythingPeer) askedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked)
}

// exchange is what one request brought: its response, and what the
// upstream asked the client while it ran.
type peerExchange struct {
	Result any
	Error  any
	Asked  []askedRequest
	Notes  []askedRequest // the notifications that arrived before the response
}

func (p *everythingPeer) do(t *testing.T, method string, params map[string]any) peerExchange {
	t.Helper()
	n := p.askedCount()
	notes, _ := p.c.inbox.snapshot()
	resp := p.c.mustRequest(method, params)
	after, _ := p.c.inbox.snapshot()
	var out peerExchange
	if len(resp.Result) > 0 {
		out.Result = decodeJSON(t, resp.Result)
	}
	if len(resp.Error) > 0 {
		out.Error = decodeJSON(t, resp.Error)
	}
	out.Asked = p.askedSince(n)
	for _, note := range after[len(notes):] {
		if note.Method == "notifications/message" || note.Method == "notifications/resources/list_changed" {
			// The upstream logs as it learns of the client's roots, and the
			// aggregator re-lists before it tells of a changed list: a
			// matter of timing, waited for apart.
			continue
		}
		out.Notes = append(out.Notes, askedRequest{note.Method, decodeParams(note.Params)})
	}
	return out
}

// leasedEverythingConfig fronts server-everything at entry on stdio as
// every, leased (an instance per session), its names unchanged, without the
// lease reminder.
func leasedEverythingConfig(entry string) string {
	return "version: 1\nservers:\n" + everythingYAML("every", entry, "lease_reminder: false")
}

// TestFidelityMoreEverythingRoundTrips compares, JSON for JSON, what a
// client of server-everything gets directly and through the aggregator
// (one leased instance, names unchanged) for the surface beyond listing:
// sampling, elicitation and roots asked by the upstream during a call (the
// requests as the client receives them, and the results the answers
// produce), blob reads, completions of prompt and resource-template
// arguments, prompts with embedded resources, and a request's _meta.
func TestFidelityMoreEverythingRoundTrips(t *testing.T) {
	entry := nodeEntry(t, everythingEntry)
	eachTransport(t, func(t *testing.T, tr transport) {
		direct := newEverythingPeer(t, connectDirect(t, nil, "node", entry, "stdio"))
		a := serveConfig(t, tr, leasedEverythingConfig(entry))
		a.waitLoaded()
		through := newEverythingPeer(t, a.newClient())
		if tr == httpTransport {
			openSessionStream(t, a, through.c) // for what comes outside a request
		}

		steps := []struct {
			name   string
			method string
			params map[string]any
		}{
			{"sampling", "tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "say hi", "maxTokens": 10}}},
			{"elicitation", "tools/call", map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{}}},
			{"roots", "tools/call", map[string]any{"name": "get-roots-list", "arguments": map[string]any{}}},
			{"blob read", "resources/read", map[string]any{"uri": "demo://resource/dynamic/blob/2"}},
			{"text read", "resources/read", map[string]any{"uri": "demo://resource/dynamic/text/2", "_meta": map[string]any{"com.example/trace": "t-1"}}},
			{"static document", "resources/read", map[string]any{"uri": "demo://resource/static/document/features.md"}},
			{"template completion", "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "demo://resource/dynamic/text/{index}"},
				"argument": map[string]any{"name": "index", "value": "1"}}},
			{"prompt completion with context", "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
				"argument": map[string]any{"name": "name", "value": ""}, "context": map[string]any{"arguments": map[string]any{"department": "Engineering"}}}},
			{"prompt with a resource", "prompts/get", map[string]any{"name": "resource-prompt", "arguments": map[string]any{"resourceType": "Blob", "resourceId": "3"}}},
			{"prompt without arguments", "prompts/get", map[string]any{"name": "simple-prompt", "_meta": map[string]any{"com.example/x": 1}}},
			{"resource links", "tools/call", map[string]any{"name": "get-resource-links", "arguments": map[string]any{"count": 3}}},
			{"structured content", "tools/call", map[string]any{"name": "get-structured-content", "arguments": map[string]any{"location": "New York"}}},
			{"tool error", "tools/call", map[string]any{"name": "get-sum", "arguments": map[string]any{"a": "x"}}},
			{"progress", "tools/call", map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 0.3, "steps": 3},
				"_meta": map[string]any{"progressToken": "p-1"}}},
			{"progress, numbered", "tools/call", map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 0.2, "steps": 2},
				"_meta": map[string]any{"progressToken": 42}}},
			{"session resource", "tools/call", map[string]any{"name": "gzip-file-as-resource", "arguments": map[string]any{"name": "note.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ="}}},
			{"session resource read", "resources/read", map[string]any{"uri": "demo://resource/session/note.gz"}},
			{"list with the session resource", "resources/list", map[string]any{}},
		}
		for _, s := range steps {
			want := direct.do(t, s.method, s.params)
			got := through.do(t, s.method, s.params)
			// The upstream asks for roots when it learns of them: at the
			// client's initialize directly, at the session's first call
			// through the aggregator (which leases the instance then).
			want.Asked = slices.DeleteFunc(want.Asked, func(r askedRequest) bool { return r.Method == "roots/list" })
			got.Asked = slices.DeleteFunc(got.Asked, func(r askedRequest) bool { return r.Method == "roots/list" })
			want.Result, got.Result = withoutClockTimes(want.Result), withoutClockTimes(got.Result)
			assert.Equal(t, want, got, "%s: %s through the aggregator differs from the upstream's", s.name, s.method)
			if s.name == "session resource" {
				for _, c := range []*client{direct.c, through.c} {
					_, ok := c.waitNotification(func(n notification) bool { return n.Method == "notifications/resources/list_changed" }, callTimeout)
					assert.True(t, ok, "told that the resource list changed")
				}
			}
		}
	})
}

// withoutTaskClock returns v with a task's own id and times left out: the
// aggregator names the task itself, and the two tasks start apart.
func withoutTaskClock(v any, ids ...string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			switch k {
			case "createdAt", "lastUpdatedAt":
				continue
			}
			out[k] = withoutTaskClock(e, ids...)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutTaskClock(e, ids...)
		}
		return out
	case string:
		if slices.Contains(ids, x) {
			return "TASK-ID"
		}
	}
	return v
}

// TestFidelityMoreEverythingTask runs server-everything's task tool
// directly and through the aggregator and compares every answer, the
// task's id and times aside: the created task, its status once completed,
// and its result, _meta included.
func TestFidelityMoreEverythingTask(t *testing.T) {
	entry := nodeEntry(t, everythingEntry)
	eachTransport(t, func(t *testing.T, tr transport) {
		// Directly over HTTP: over stdio, server-everything does not exit
		// at the end of its input once it has run a task.
		box := newInbox()
		wire := newHTTPWire(remoteEverything(t, "streamableHttp")+"/mcp", box)
		direct := newEverythingPeer(t, &client{t: t, wire: wire, inbox: box})
		a := serveConfig(t, tr, leasedEverythingConfig(entry))
		a.waitLoaded()
		through := newEverythingPeer(t, a.newClient())

		run := func(p *everythingPeer) (created, done, result any) {
			ex := p.do(t, "tools/call", map[string]any{"name": "simulate-research-query",
				"arguments": map[string]any{"topic": "gateways", "ambiguous": false}, "task": map[string]any{}}) // with a ttl, node waits it out at exit
			require.Nil(t, ex.Error)
			id := ex.Result.(map[string]any)["task"].(map[string]any)["taskId"].(string)
			deadline := time.Now().Add(callTimeout)
			for {
				got := p.do(t, "tasks/get", map[string]any{"taskId": id})
				require.Nil(t, got.Error)
				if s := got.Result.(map[string]any)["status"]; s != "working" {
					done = withoutTaskClock(got.Result, id)
					break
				}
				require.True(t, time.Now().Before(deadline), "the task did not end within %s", callTimeout)
				<-time.After(200 * time.Millisecond) // the task's own pollInterval is longer
			}
			res := p.do(t, "tasks/result", map[string]any{"taskId": id})
			require.Nil(t, res.Error)
			return withoutTaskClock(ex.Result, id), done, withoutTaskClock(res.Result, id)
		}
		wc, wd, wr := run(direct)
		gc, gd, gr := run(through)
		assert.Equal(t, wc, gc, "the created task")
		assert.Equal(t, wd, gd, "the ended task")
		assert.Equal(t, wr, gr, "the task's result")
	})
}
