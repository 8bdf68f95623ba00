package proxy

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// withSurfaceCaps makes p's running state offer caps, as a commit of a
// server that declared them would.
func withSurfaceCaps(p *Proxy, caps catalog.Declared) {
	next := p.current().with()
	next.surface = catalog.NewSurface([]catalog.ServerLists{{Config: &config.Server{ID: "declares"}, Declared: caps}}, "", nil)
	p.publish(next)
}

// initializeSession answers an initialize for s and registers s, as a
// transport does, and returns the capabilities offered.
func initializeSession(t *testing.T, p *Proxy, s downstream.Session) map[string]json.RawMessage {
	t.Helper()
	msg := &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "initialize",
		Params: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{}}`)}
	resp := p.Handle(context.Background(), &downstream.Request{Msg: msg, Session: s, Send: func(*jsonrpc.Message) bool { return true }})
	require.NotNil(t, resp)
	require.Nil(t, resp.Error)
	p.SessionOpened(s)
	var res struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &res))
	return res.Capabilities
}

// sentMethods drains what s was sent so far.
func sentMethods(s notifySession) []string {
	var out []string
	for {
		select {
		case m := <-s.sent:
			out = append(out, m.Method)
		default:
			return out
		}
	}
}

// A session hears that the resource or prompt list changed only when it was
// offered resources or prompts at its initialize; tools always.
func TestListChangedOnlyForOfferedCapabilities(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()

	bare := notifySession{fakeSession: "bare", sent: make(chan *jsonrpc.Message, 8)}
	caps := initializeSession(t, p, bare)
	assert.NotContains(t, caps, "resources")
	assert.NotContains(t, caps, "prompts")

	withSurfaceCaps(p, catalog.Declared{Resources: true, Subscribe: true, Prompts: true})
	full := notifySession{fakeSession: "full", sent: make(chan *jsonrpc.Message, 8)}
	caps = initializeSession(t, p, full)
	assert.Contains(t, caps, "resources")
	assert.Contains(t, caps, "prompts")

	for _, kind := range []string{"resources", "prompts", "tools"} {
		p.clients.changed(kind)
	}
	assert.Equal(t, []string{"notifications/tools/list_changed"}, sentMethods(bare),
		"a session offered tools alone hears of tools alone")
	assert.Equal(t, []string{"notifications/resources/list_changed", "notifications/prompts/list_changed", "notifications/tools/list_changed"},
		sentMethods(full))
	assert.True(t, p.sessions.find(full).offered().subscribe)
	assert.False(t, p.sessions.find(bare).offered().subscribe, "no resources/updated for a session not offered subscriptions")

	p.SessionClosed(full)
	assert.Nil(t, p.sessions.find(full), "a closed session's Session is gone")
	assert.Equal(t, offer{}, p.sessions.find(full).offered(), "a closed session's offer is dropped")
}

// A Session's Close ends everything it held: its subscriptions, log level,
// offer and bound instances go with it, and a session of the same key that
// is not it (a stale pointer) cannot close it.
func TestSessionCloseDropsWhatItHolds(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()
	ds := notifySession{fakeSession: "s1", sent: make(chan *jsonrpc.Message, 8)}
	initializeSession(t, p, ds)
	s := p.sessions.find(ds)
	require.NotNil(t, s)
	s.setLevel(logLevels["error"])
	_, room := s.subscribe("srv", "file:///a")
	require.True(t, room)
	assert.Equal(t, []string{"file:///a"}, p.sessions.uris("srv"))
	assert.True(t, p.sessions.heldByOther("other", "srv", "file:///a"))
	assert.Len(t, p.sessions.live(), 1)

	stale := notifySession{fakeSession: "s1", sent: make(chan *jsonrpc.Message, 1)}
	p.SessionClosed(stale)
	assert.Same(t, s, p.sessions.find(ds), "another session of the same key leaves it be")

	p.SessionClosed(ds)
	assert.Nil(t, p.sessions.find(ds))
	assert.Empty(t, p.sessions.live())
	assert.Empty(t, p.sessions.uris("srv"))
	assert.Equal(t, defaultLogLevel, s.logLevel())
	_, room = s.subscribe("srv", "file:///b")
	assert.False(t, room, "nothing is recorded on a closed Session")
}

// The offer of a session that never registers (its initialize was answered,
// but the session did not open) is dropped in time, not kept forever.
func TestPendingOfferExpires(t *testing.T) {
	var reg sessions
	reg.of(fakeSession("ghost")).setOffer(offer{resources: true})
	reg.by[sessionLeaseKey(fakeSession("ghost"))].since = time.Now().Add(-2 * pendingOfferTTL)
	reg.of(fakeSession("next")).setOffer(offer{prompts: true})
	assert.NotContains(t, reg.by, sessionLeaseKey(fakeSession("ghost")))
	assert.Contains(t, reg.by, sessionLeaseKey(fakeSession("next")))
	assert.Nil(t, reg.lookup(sessionLeaseKey(fakeSession("next"))), "not registered before it opens")
	reg.open(fakeSession("next"))
	require.NotNil(t, reg.lookup(sessionLeaseKey(fakeSession("next"))))
	assert.True(t, reg.lookup(sessionLeaseKey(fakeSession("next"))).offered().prompts)
}

// TestInitializeDuringTheFirstLoad: initialize and server/discover answer at once,
// however long the upstreams take to start (SPEC §7), and while they start they offer
// every list the aggregator serves (initialize every tasks operation too), so that a
// session does not lose for its life what the servers still starting bring. Once
// loaded, they offer what the servers offer.
func TestInitializeDuringTheFirstLoad(t *testing.T) {
	for _, method := range []string{"initialize", "server/discover"} {
		t.Run(method, func(t *testing.T) {
			p := newTestProxy(t)
			protocol, params := "", `{"protocolVersion":"2025-11-25","capabilities":{}}`
			if method == "server/discover" {
				protocol, params = "2026-07-28", ""
			}
			ask := func() string {
				t.Helper()
				resp := handle(t, p, protocol, method, params)
				require.Nil(t, resp.Error)
				return string(members(t, resp.Result)["capabilities"])
			}
			during := ask() // the first load has not ended: no wait
			for _, c := range []string{`"resources"`, `"prompts"`, `"completions"`, `"logging"`} {
				assert.Contains(t, during, c, "offered while the servers start")
			}
			if method == "initialize" {
				assert.Contains(t, during, `"tasks":{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`, "every tasks operation, as every list")
			} else {
				assert.NotContains(t, during, `"tasks"`, "server/discover's generation has tasks as an extension")
			}
			withSurfaceCaps(p, catalog.Declared{Prompts: true})
			p.MarkLoaded()
			after := ask()
			assert.Contains(t, after, `"prompts"`)
			assert.NotContains(t, after, `"resources"`, "once loaded, what the servers offer")
			assert.NotContains(t, after, `"tasks"`, "once loaded, tasks only as servers declare them")
		})
	}
}

// Log messages go only to sessions offered logging at their initialize: a
// server that did not declare logging must not send them, even when a server
// added later logs. A session not offered logging asks upstreams for none.
func TestLogMessagesOnlyForSessionsOfferedLogging(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()

	bare := notifySession{fakeSession: "bare", sent: make(chan *jsonrpc.Message, 8)}
	caps := initializeSession(t, p, bare)
	require.NotContains(t, caps, "logging")

	withSurfaceCaps(p, catalog.Declared{Logging: true})
	full := notifySession{fakeSession: "full", sent: make(chan *jsonrpc.Message, 8)}
	caps = initializeSession(t, p, full)
	require.Contains(t, caps, "logging")

	msg := &jsonrpc.Message{Method: "notifications/message", Params: json.RawMessage(`{"level":"error","data":"x"}`)}
	for _, s := range []notifySession{bare, full} {
		var sent []*jsonrpc.Message
		call := &jsonrpc.Message{ID: json.RawMessage(`2`), Method: "tools/call", Params: json.RawMessage(`{"name":"t"}`)}
		req := &downstream.Request{Msg: call, Session: s, Protocol: "2025-11-25",
			Send: func(m *jsonrpc.Message) bool { sent = append(sent, m); return true }}
		p.logToRequest(req, logLevels["error"], msg)
		level := upstream.CallerOf(p.withCaller(context.Background(), req)).LogLevel()
		if s == bare {
			assert.Empty(t, sent, "a session not offered logging got a log message")
			assert.Empty(t, level, "a session not offered logging asks for log messages")
		} else {
			assert.Len(t, sent, 1)
			assert.Equal(t, "info", level)
		}
		assert.Equal(t, s == full, p.wantsLog(s, msg.Params))
	}
}

// A log message whose level is none of MCP's is not relayed: a client that
// checks messages against the schema would reject it.
func TestLogMessageWithUnknownLevelIsDropped(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()
	withSurfaceCaps(p, catalog.Declared{Logging: true})
	s := notifySession{fakeSession: "s", sent: make(chan *jsonrpc.Message, 8)}
	initializeSession(t, p, s)

	_, _, ok := logNotification("srv", json.RawMessage(`{"level":"loud","data":"x"}`))
	assert.False(t, ok)
	assert.False(t, p.wantsLog(s, []byte(`{"level":"loud","data":"x"}`)))
	level, msg, ok := logNotification("srv", json.RawMessage(`{"level":"warning","data":"x"}`))
	require.True(t, ok)
	assert.Equal(t, logLevels["warning"], level)
	assert.JSONEq(t, `{"level":"warning","data":"x","logger":"srv"}`, string(msg.Params))
	assert.True(t, p.wantsLog(s, []byte(`{"level":"warning","data":"x"}`)))
}
