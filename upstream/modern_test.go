package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// listenServer is a minimal protocol 2026-07-28 server over HTTP: it answers
// server/discover, tools/list and tools/call (whose text is the request's
// _meta log level), and holds subscriptions/listen streams open, writing on
// them what the test sends.
type listenServer struct {
	opened  chan chan string // one per subscriptions/listen: the test sends "change" or "close"
	filters chan json.RawMessage
	mu      sync.Mutex
	levels  []string
}

func (s *listenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta          map[string]json.RawMessage `json:"_meta"`
			Notifications json.RawMessage            `json:"notifications"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}
	switch msg.Method {
	case "server/discover":
		answer(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"serverInfo":{"name":"listen","version":"1"}}`)
	case "tools/list":
		answer(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		var level string
		_ = json.Unmarshal(msg.Params.Meta[metaLogLevel], &level)
		s.mu.Lock()
		s.levels = append(s.levels, level)
		s.mu.Unlock()
		answer(`{"content":[{"type":"text","text":"ok"}]}`)
	case "subscriptions/listen":
		s.filters <- msg.Params.Notifications
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(data string) {
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
			w.(http.Flusher).Flush()
		}
		meta := fmt.Sprintf(`{"io.modelcontextprotocol/subscriptionId":%s}`, msg.ID)
		event(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":` + meta + `,"notifications":` + string(msg.Params.Notifications) + `}}`)
		ctl := make(chan string)
		select {
		case s.opened <- ctl:
		case <-r.Context().Done():
			return
		}
		for {
			select {
			case what := <-ctl:
				switch {
				case what == "close":
					event(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","_meta":%s}}`, msg.ID, meta))
					return
				case strings.HasPrefix(what, "update "):
					event(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":` + meta + `,"uri":"` + strings.TrimPrefix(what, "update ") + `"}}`)
				default:
					event(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":` + meta + `}}`)
				}
			case <-r.Context().Done():
				return
			}
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no %s"}}`, msg.ID, msg.Method)
	}
}

// TestModernListenFollowsListChanges: a sessionless upstream's list changes
// come on the subscriptions/listen stream the instance keeps open; a stream
// the upstream ends is opened again, and the lists are read again then.
func TestModernListenFollowsListChanges(t *testing.T) {
	srv := &listenServer{opened: make(chan chan string), filters: make(chan json.RawMessage, 4)}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var changes atomic.Int32
	changed := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	updates := make(chan Notification, 4)
	inst, err := Start(ctx, &config.Server{ID: "listen", Transport: config.TransportHTTP, URL: hs.URL, Protocol: "2026-07-28"}, Options{
		OnToolsChanged: func(*Instance) { changes.Add(1); changed <- struct{}{} },
		OnNotification: func(_ *Instance, n Notification) {
			if n.Method == "notifications/resources/updated" {
				updates <- n
			}
		},
	})
	require.NoError(t, err)
	defer inst.Close()

	wait := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's time", what)
		}
	}
	var ctl chan string
	select {
	case ctl = <-srv.opened:
	case <-ctx.Done():
		t.Fatal("no subscriptions/listen stream was opened")
	}
	assert.JSONEq(t, `{"toolsListChanged":true}`, string(<-srv.filters))
	assert.Zero(t, changes.Load(), "the first acknowledgement reads nothing again")

	ctl <- "change"
	wait("a list change on the stream")

	// The upstream ends the stream: it is opened again, and what changed in
	// between is read.
	ctl <- "close"
	select {
	case ctl = <-srv.opened:
	case <-ctx.Done():
		t.Fatal("the stream was not opened again")
	}
	assert.JSONEq(t, `{"toolsListChanged":true}`, string(<-srv.filters))
	wait("the lists read again after a new stream")
	ctl <- "change"
	wait("a list change on the new stream")

	// resources/subscribe becomes a URI in the filter of a new stream, and is
	// answered once that stream is acknowledged.
	subscribed := make(chan error, 1)
	go func() {
		_, err := inst.Do(ctx, Request{Method: "resources/subscribe", Params: json.RawMessage(`{"uri":"file:///a"}`)})
		subscribed <- err
	}()
	select {
	case ctl = <-srv.opened:
	case <-ctx.Done():
		t.Fatal("subscribing opened no new stream")
	}
	assert.JSONEq(t, `{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]}`, string(<-srv.filters))
	require.NoError(t, <-subscribed)
	ctl <- "update file:///a"
	select {
	case n := <-updates:
		var p struct {
			URI string `json:"uri"`
		}
		require.NoError(t, json.Unmarshal(n.Params, &p))
		assert.Equal(t, "file:///a", p.URI)
	case <-ctx.Done():
		t.Fatal("no resources/updated")
	}
	assert.Equal(t, int32(3), changes.Load(), "a stream replaced for a new filter reads no list again")

	// Unsubscribing replaces the stream without the URI, at once.
	_, err = inst.Do(ctx, Request{Method: "resources/unsubscribe", Params: json.RawMessage(`{"uri":"file:///a"}`)})
	require.NoError(t, err)
	select {
	case ctl = <-srv.opened:
	case <-ctx.Done():
		t.Fatal("unsubscribing opened no new stream")
	}
	assert.JSONEq(t, `{"toolsListChanged":true}`, string(<-srv.filters))

	// The caller's log level goes in _meta; none when it has none.
	_, err = inst.CallTool(WithCaller(ctx, levelOnly("warning")), Call{Name: "t"})
	require.NoError(t, err)
	_, err = inst.CallTool(ctx, Call{Name: "t"})
	require.NoError(t, err)
	srv.mu.Lock()
	assert.Equal(t, []string{"warning", ""}, srv.levels)
	srv.mu.Unlock()
}

// TestModernListenNothingToFollow: an upstream that announces no list
// changes gets no subscriptions/listen.
func TestModernListenNothingToFollow(t *testing.T) {
	i := &Instance{protocol: "2026-07-28"}
	assert.Nil(t, i.listenFilter())
	i.caps = Capabilities{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true}
	assert.JSONEq(t, `{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}}`, string(i.listenFilter()))
	// An older upstream's parameters stay as they are, whatever the level.
	old := &Instance{protocol: "2025-11-25"}
	params := json.RawMessage(`{"name":"x"}`)
	assert.Equal(t, string(params), string(old.modernParams(WithCaller(context.Background(), levelOnly("debug")), params)))
}

// levelOnly is a caller that wants log messages at a level and drops them.
type levelOnly string

func (l levelOnly) LogLevel() string             { return string(l) }
func (levelOnly) Log(*Instance, json.RawMessage) {}
