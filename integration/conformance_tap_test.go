package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// upstreamTap relays HTTP between the aggregator and an upstream, unchanged, and
// counts the notifications the upstream writes on its event streams (a call's
// stream and the standalone GET stream alike), by method. Set between the
// aggregator and mcp-go's conformance server, it tells a notification the
// upstream never sent from one the aggregator lost.
type upstreamTap struct {
	url string

	mu   sync.Mutex
	sent map[string]int // method -> notifications written so far
}

// startUpstreamTap relays to the MCP endpoint target until the test ends and
// returns the tap, whose url the aggregator is to use instead.
func startUpstreamTap(t *testing.T, target string) *upstreamTap {
	t.Helper()
	to, err := url.Parse(target)
	require.NoError(t, err)
	tap := &upstreamTap{sent: map[string]int{}}
	relay := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: to.Scheme, Host: to.Host})
			r.Out.URL.Path = to.Path
		},
		FlushInterval: -1, // every write of an event stream goes on at once
		ModifyResponse: func(resp *http.Response) error {
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				resp.Body = &eventCounter{body: resp.Body, tap: tap}
			}
			return nil
		},
	}
	srv := httptest.NewServer(relay)
	t.Cleanup(srv.Close)
	tap.url = srv.URL + to.Path
	return tap
}

// count is how many notifications of method the upstream has written so far.
func (u *upstreamTap) count(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent[method]
}

func (u *upstreamTap) saw(method string) {
	u.mu.Lock()
	u.sent[method]++
	u.mu.Unlock()
}

// eventCounter passes an event stream through and counts, as each line is
// complete, the notifications in its data lines. The count of an event is made
// before any of its bytes reach the aggregator.
type eventCounter struct {
	body    io.ReadCloser
	tap     *upstreamTap
	partial []byte // the start of a line the next read completes
}

func (e *eventCounter) Read(p []byte) (int, error) {
	n, err := e.body.Read(p)
	e.partial = append(e.partial, p[:n]...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			break
		}
		e.line(bytes.TrimRight(e.partial[:i], "\r"))
		e.partial = e.partial[i+1:]
	}
	return n, err
}

func (e *eventCounter) line(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &m) == nil && m.Method != "" && len(m.ID) == 0 {
		e.tap.saw(m.Method)
	}
}

func (e *eventCounter) Close() error { return e.body.Close() }
