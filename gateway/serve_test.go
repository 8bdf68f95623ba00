package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// testWait bounds how long a test waits for an event that is due.
const testWait = 30 * time.Second

// served is a gateway serving on a real listener of its own.
type served struct {
	gw     *Gateway
	url    string
	stop   context.CancelFunc // the stop signal
	loaded chan int
	code   chan int // Serve's exit code, once it returned
}

func serveGateway(t *testing.T) *served {
	t.Helper()
	p := proxy.New(proxy.Options{Logger: quiet(), Version: "test"})
	t.Cleanup(func() { p.Close(context.Background()) })
	edge := downstream.NewHTTP(p, downstream.HTTPOptions{Logger: quiet()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	s := &served{gw: &Gateway{Edge: edge, Proxy: p, Drain: NewDrainer(edge, testWait, quiet())},
		url: "http://" + ln.Addr().String() + "/mcp", stop: stop, loaded: make(chan int, 1), code: make(chan int, 1)}
	go func() { s.code <- s.gw.Serve(ctx, ln, false, s.loaded, quiet()) }()
	return s
}

// exited is Serve's exit code, once it returned.
func (s *served) exited(t *testing.T) int {
	t.Helper()
	select {
	case code := <-s.code:
		return code
	case <-time.After(testWait):
		t.Fatal("Serve did not return")
		return -1
	}
}

// listen opens a 2026-07-28 subscriptions/listen stream and returns its
// events' data, in order, the channel closed when the stream ends; the
// first, the acknowledgement, has been read.
func listen(t *testing.T, url string) <-chan []byte {
	t.Helper()
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "gateway-test", "version": "1"},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
		"params": map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": meta}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := make(chan []byte, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				events <- []byte(strings.TrimSpace(data))
			}
		}
	}()
	select {
	case ack := <-events:
		require.Contains(t, string(ack), "notifications/subscriptions/acknowledged")
	case <-time.After(testWait):
		t.Fatal("no acknowledgement of the listen stream")
	}
	return events
}

// TestServeShutsDownInOrder: on a stop signal the gateway drains, then
// ends the listen streams with their final result while it still writes
// to them, then closes its listener, then the proxy.
func TestServeShutsDownInOrder(t *testing.T) {
	s := serveGateway(t)
	s.loaded <- 0
	events := listen(t, s.url)

	s.stop()
	var last []byte
	for ev := range events {
		last = ev
	}
	require.NotNil(t, last, "the listen stream was cut without its final result")
	var final struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(last, &final), "%s", last)
	assert.JSONEq(t, `7`, string(final.ID), "%s", last)
	assert.NotNil(t, final.Result, "the final result, not an error: %s", last)
	assert.Nil(t, final.Error, "%s", last)

	assert.Equal(t, 0, s.exited(t))
	assert.True(t, s.gw.Drain.Draining(), "drained before it stopped")
	_, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp"), testWait)
	assert.Error(t, err, "the listener is closed")
	// The proxy was closed too, not left to the caller: a closed proxy
	// ends a new listen stream at once, after its acknowledgement.
	again := downstream.NewHTTP(s.gw.Proxy, downstream.HTTPOptions{Logger: quiet()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = again.Serve(ln, again) }()
	t.Cleanup(func() { _ = again.Shutdown(context.Background()) })
	events = listen(t, "http://"+ln.Addr().String()+"/mcp")
	select {
	case final := <-events:
		assert.Contains(t, string(final), `"result"`)
	case <-time.After(testWait):
		t.Fatal("the listen stream of a closed proxy stays open: the proxy was not closed")
	}
}

// TestServeFirstLoadFails: a first load that fails ends serving with its
// code, without waiting for a drain, and closes the listener.
func TestServeFirstLoadFails(t *testing.T) {
	s := serveGateway(t)
	s.loaded <- 3
	assert.Equal(t, 3, s.exited(t))
	assert.False(t, s.gw.Drain.Draining(), "nothing to drain for")
	_, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp"), testWait)
	assert.Error(t, err, "the listener is closed")
}

// TestServeDrainRequested: POST /drain from loopback drains and stops
// with code 0.
func TestServeDrainRequested(t *testing.T) {
	s := serveGateway(t)
	s.loaded <- 0
	resp, err := http.Post(strings.TrimSuffix(s.url, "/mcp")+"/drain", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, 0, s.exited(t))
	assert.True(t, s.gw.Drain.Draining())
}
