package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// handle runs one request through the dispatcher, as a transport would.
func handle(t *testing.T, p *Proxy, protocol, method, params string) *jsonrpc.Message {
	t.Helper()
	msg := &jsonrpc.Message{ID: json.RawMessage(`1`), Method: method}
	if params != "" {
		msg.Params = json.RawMessage(params)
	}
	resp := p.Handle(context.Background(), &downstream.Request{Msg: msg, Protocol: protocol, Send: func(*jsonrpc.Message) bool { return true }})
	require.NotNil(t, resp)
	return resp
}

func members(t *testing.T, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return m
}

func TestDispatchProtocolGenerations(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()

	old := members(t, handle(t, p, "2025-11-25", "tools/list", "").Result)
	assert.Contains(t, old, "tools")
	assert.NotContains(t, old, "ttlMs", "older versions get no caching hints")
	assert.NotContains(t, old, "resultType")

	modern := members(t, handle(t, p, "2026-07-28", "tools/list", "").Result)
	assert.JSONEq(t, `0`, string(modern["ttlMs"]), "2026-07-28 requires ttlMs on tools/list")
	assert.JSONEq(t, `"private"`, string(modern["cacheScope"]))
	assert.JSONEq(t, `"complete"`, string(modern["resultType"]))

	disc := members(t, handle(t, p, "2026-07-28", "server/discover", "").Result)
	assert.Contains(t, string(disc["supportedVersions"]), "2026-07-28")
	assert.Contains(t, string(disc["capabilities"]), "tools")
	assert.Contains(t, disc, "ttlMs")

	resp := handle(t, p, "2025-11-25", "tools/list", `{"cursor":"abc"}`)
	require.NotNil(t, resp.Error)
	assert.Equal(t, jsonrpc.CodeInvalidParams, resp.Error.Code)

	resp = handle(t, p, "2025-11-25", "no/such/method", "")
	require.NotNil(t, resp.Error)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, resp.Error.Code)

	for _, tc := range []struct{ asked, got string }{
		{"2025-06-18", "2025-06-18"}, {"2024-11-05", "2024-11-05"}, {"2026-07-28", "2025-11-25"}, {"1999-01-01", "2025-11-25"},
	} {
		init := members(t, handle(t, p, "", "initialize", `{"protocolVersion":"`+tc.asked+`","capabilities":{}}`).Result)
		assert.JSONEq(t, `"`+tc.got+`"`, string(init["protocolVersion"]), "asked %s", tc.asked)
	}
}

func TestWithMember(t *testing.T) {
	assert.Equal(t, `{"resultType":"complete","a":1}`, string(rawjson.Add([]byte(`{"a":1}`), "resultType", []byte(`"complete"`))))
	assert.Equal(t, `{"resultType":"complete"}`, string(rawjson.Add([]byte(`{}`), "resultType", []byte(`"complete"`))))
	assert.Equal(t, `{ "resultType":"x"}`, string(rawjson.Add([]byte(`{ "resultType":"x"}`), "resultType", []byte(`"complete"`))), "an upstream's own member is kept")
}

// A listen stream gets its acknowledgement first, then list_changed with
// its subscription id, and ends gracefully when the proxy closes.
func TestDispatchListen(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()
	got := make(chan *jsonrpc.Message, 8)
	msg := &jsonrpc.Message{ID: json.RawMessage(`"sub-1"`), Method: "subscriptions/listen",
		Params: json.RawMessage(`{"notifications":{"toolsListChanged":true,"promptsListChanged":true}}`)}
	done := make(chan *jsonrpc.Message, 1)
	go func() {
		done <- p.Handle(context.Background(), &downstream.Request{Msg: msg, Protocol: "2026-07-28",
			Send: func(m *jsonrpc.Message) bool { got <- m; return true }})
	}()
	ack := <-got
	assert.Equal(t, "notifications/subscriptions/acknowledged", ack.Method)
	assert.JSONEq(t, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"},"notifications":{"toolsListChanged":true}}`, string(ack.Params),
		"only what the aggregator sends is acknowledged")

	reconcile(t, p, load(t, t.TempDir(), baseServers()))
	select {
	case n := <-got:
		assert.Equal(t, "notifications/tools/list_changed", n.Method)
		assert.JSONEq(t, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"}}`, string(n.Params))
	case <-time.After(waitTimeout):
		t.Fatal("no list_changed on the listen stream")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p.Close(ctx)
	end := <-done
	require.NotNil(t, end)
	assert.JSONEq(t, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1","io.modelcontextprotocol/serverInfo":{"name":"mcp-aggregator","version":"test"}},"resultType":"complete"}`, string(end.Result))
}

func TestRelistsCoalesce(t *testing.T) {
	var r relists
	r.init()
	release := make(chan struct{})
	var runs atomic.Int32
	ran := make(chan struct{}, 100)
	run := func(*upstream.Instance) {
		runs.Add(1)
		<-release
		ran <- struct{}{}
	}
	for i := 0; i < 1000; i++ {
		r.request("s", nil, run)
	}
	close(release)
	<-ran
	<-ran
	select {
	case <-ran:
		t.Fatal("more than one running and one pending relist")
	case <-time.After(100 * time.Millisecond):
	}
	assert.EqualValues(t, 2, runs.Load())
}

// A reload that changes limits.max_concurrent while calls run: the limits
// are part of the published state, read once per call (run with -race).
func TestReloadChangesLimitsUnderLoad(t *testing.T) {
	p := newTestProxy(t)
	dir := t.TempDir()
	ws := load(t, dir, baseServers())
	reconcile(t, p, ws)
	p.MarkLoaded()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var calls, failures atomic.Int64
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp := handle(t, p, "2025-11-25", "tools/call", `{"name":"demo_echo","arguments":{"text":"x"}}`)
				calls.Add(1)
				if resp.Error != nil {
					failures.Add(1)
				}
			}
		}()
	}
	deadline := time.Now().Add(waitTimeout)
	for calls.Load() < 32 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // calls are under way before the first reload
	}
	for i := 1; i <= 6; i++ {
		next := *ws
		next.Limits = config.Limits{MaxConcurrent: i * 3}
		reconcile(t, p, &next)
	}
	close(stop)
	wg.Wait()
	assert.Positive(t, calls.Load())
	assert.Zero(t, failures.Load(), "every call got a result across %d calls", calls.Load())
	assert.Equal(t, 18, p.current().limits.global.Size())
}
