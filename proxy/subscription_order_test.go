package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// lateUnsubscribeUpstream is a streamable-HTTP MCP server with resource
// subscriptions that works on its requests side by side, as an HTTP server
// may. Once holdUnsubscribes is called, a resources/unsubscribe takes
// effect when it is answered, and is answered only after a
// resources/subscribe has arrived or release is closed: a subscribe sent
// while an unsubscribe is on its way is overtaken by it.
type lateUnsubscribeUpstream struct {
	unsubscribing chan struct{} // an unsubscribe arrived and is held
	release       chan struct{}

	mu         sync.Mutex
	subscribed map[string]bool
	hold       bool
	subscribe  chan struct{} // closed when a subscribe arrives while unsubscribes are held
}

func newLateUnsubscribeUpstream(t *testing.T) (*lateUnsubscribeUpstream, string) {
	u := &lateUnsubscribeUpstream{unsubscribing: make(chan struct{}, 1), release: make(chan struct{}), subscribed: map[string]bool{}}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv.URL
}

// holdUnsubscribes makes later unsubscribes wait as the type says, and
// returns the channel closed when a subscribe arrives.
func (u *lateUnsubscribeUpstream) holdUnsubscribes() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.hold, u.subscribe = true, make(chan struct{})
	return u.subscribe
}

func (u *lateUnsubscribeUpstream) holds(uri string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.subscribed[uri]
}

func (u *lateUnsubscribeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed) // no GET stream
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.IsNotification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var params struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(msg.Params, &params)
	result := `{}`
	switch msg.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{"subscribe":true}},"serverInfo":{"name":"late-unsubscribe","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`
	case "resources/list":
		result = `{"resources":[{"uri":"demo://x","name":"x"}]}`
	case "resources/templates/list":
		result = `{"resourceTemplates":[]}`
	case "resources/subscribe":
		u.mu.Lock()
		u.subscribed[params.URI] = true
		if u.subscribe != nil {
			close(u.subscribe)
			u.subscribe = nil
		}
		u.mu.Unlock()
	case "resources/unsubscribe":
		u.mu.Lock()
		hold, subscribe := u.hold, u.subscribe
		u.mu.Unlock()
		if hold {
			u.unsubscribing <- struct{}{}
			select {
			case <-subscribe:
			case <-u.release:
			case <-r.Context().Done():
				return
			}
		}
		u.mu.Lock()
		u.subscribed[params.URI] = false
		u.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jsonrpc.AppendLine(nil, &jsonrpc.Message{ID: msg.ID, Result: json.RawMessage(result)}))
}

// subscriptionCall is a resources/subscribe or unsubscribe of uri by s.
func subscriptionCall(s downstream.Session, id int, method, uri string) *downstream.Request {
	return &downstream.Request{Session: s, Protocol: "2025-11-25", Send: func(*jsonrpc.Message) bool { return true },
		Msg: &jsonrpc.Message{ID: json.RawMessage(fmt.Sprint(id)), Method: method, Params: json.RawMessage(`{"uri":"` + uri + `"}`)}}
}

// TestSubscribeWaitsForAnotherSessionsUnsubscribe: session b holds the
// last subscription to a URI of a shared instance and unsubscribes; while
// that unsubscribe is on its way upstream, session a subscribes. The
// upstream, which would let a subscribe sent now be overtaken by the
// unsubscribe, gets a's subscribe only once b's unsubscribe is answered,
// and ends subscribed, as a holds the URI.
func TestSubscribeWaitsForAnotherSessionsUnsubscribe(t *testing.T) {
	const uri = "demo://x"
	up, url := newLateUnsubscribeUpstream(t)
	ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), []byte(`version: 1
servers:
  late:
    transport: streamable_http
    url: '`+url+`'
    truely-stateless: true
`), nil)
	require.False(t, config.HasErrors(problems), "problems: %v", problems)
	p := newTestProxy(t)
	waiting := make(chan struct{}, 1)
	p.subOrder.onWait = func(server, u string) {
		if server == "late" && u == uri {
			waiting <- struct{}{}
		}
	}
	reconcile(t, p, ws)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	a, b := fakeSession("a"), fakeSession("b")
	resp := p.Handle(ctx, subscriptionCall(b, 1, "resources/subscribe", uri))
	require.Nil(t, resp.Error, "b subscribes")
	require.True(t, up.holds(uri))

	subscribed := up.holdUnsubscribes()
	answers := make(chan *jsonrpc.Message, 2)
	go func() { answers <- p.Handle(ctx, subscriptionCall(b, 2, "resources/unsubscribe", uri)) }()
	select {
	case <-up.unsubscribing:
	case <-ctx.Done():
		t.Fatal("b's unsubscribe never reached the upstream")
	}
	go func() { answers <- p.Handle(ctx, subscriptionCall(a, 3, "resources/subscribe", uri)) }()
	select {
	case <-subscribed:
		// a's subscribe went out while b's unsubscribe was on its way.
	case <-waiting:
		close(up.release) // a waits its turn: b's unsubscribe may end now
	case <-ctx.Done():
		t.Fatal("a's subscribe neither reached the upstream nor waited for its turn")
	}
	for range 2 {
		select {
		case resp := <-answers:
			require.NotNil(t, resp)
			require.Nil(t, resp.Error)
			assert.JSONEq(t, `{}`, string(resp.Result))
		case <-ctx.Done():
			t.Fatal("a request was never answered")
		}
	}
	assert.True(t, up.holds(uri), "session a holds %s, but the upstream ended unsubscribed from it", uri)
}

// TestSubscriptionOrderTurns: one turn per server and URI at a time; a
// taker whose context ends stops waiting; a turn no one has or awaits is
// forgotten.
func TestSubscriptionOrderTurns(t *testing.T) {
	var o subscriptionOrder
	ctx := context.Background()
	release, err := o.take(ctx, "s", "a://1")
	require.NoError(t, err)
	other, err := o.take(ctx, "s", "a://2")
	require.NoError(t, err, "another URI has its own turn")
	other()

	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = o.take(gone, "s", "a://1")
	require.ErrorIs(t, err, context.Canceled, "the turn is taken: a taker whose context ended stops waiting")

	got := make(chan func(), 1)
	waits := make(chan struct{}, 1)
	o.mu.Lock()
	o.onWait = func(string, string) { waits <- struct{}{} }
	o.mu.Unlock()
	go func() {
		next, err := o.take(ctx, "s", "a://1")
		if err == nil {
			got <- next
		}
	}()
	<-waits
	select {
	case <-got:
		t.Fatal("two takers had the same turn at once")
	default:
	}
	release()
	(<-got)()
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Empty(t, o.turns, "turns no one has or awaits are forgotten")
}
