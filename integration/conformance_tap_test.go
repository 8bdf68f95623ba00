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
// counts the notifications the upstream writes on its event streams, by method
// and by stream: on the streams that answer POSTs (a call's own stream) and on
// the standalone GET stream. Set between the aggregator and mcp-go's conformance
// server, it tells a notification the upstream never sent on the call's stream
// from one the aggregator lost.
type upstreamTap struct {
	url string

	mu     sync.Mutex
	onPOST map[string]int // method -> notifications written on POST streams so far
	onGET  map[string]int // the same on GET streams
}

// tapMaxBody bounds a request body the tap relays; the suite's are small.
const tapMaxBody = 1 << 20

// startUpstreamTap relays to the MCP endpoint target until the test ends and
// returns the tap, whose url the aggregator is to use instead.
func startUpstreamTap(t *testing.T, target string) *upstreamTap {
	t.Helper()
	to, err := url.Parse(target)
	require.NoError(t, err)
	tap := &upstreamTap{onPOST: map[string]int{}, onGET: map[string]int{}}
	relay := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: to.Scheme, Host: to.Host})
			r.Out.URL.Path = to.Path
			// The body goes on from memory: the transport may read a
			// request body after the upstream has answered (to see its
			// end), and by then this handler may have returned and the
			// server closed the body, which fails the connection and
			// whatever stream the transport put on it next.
			if r.In.Body != nil {
				body, err := io.ReadAll(io.LimitReader(r.In.Body, tapMaxBody))
				if err != nil {
					body = nil
				}
				r.Out.Body, r.Out.ContentLength, r.Out.GetBody = nil, 0, nil
				if len(body) > 0 {
					r.Out.Body, r.Out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
					r.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
				}
			}
		},
		FlushInterval: -1, // every write of an event stream goes on at once
		ModifyResponse: func(resp *http.Response) error {
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				resp.Body = &eventCounter{body: resp.Body, tap: tap, get: resp.Request.Method == http.MethodGet}
			}
			return nil
		},
	}
	srv := httptest.NewServer(relay)
	t.Cleanup(srv.Close)
	tap.url = srv.URL + to.Path
	return tap
}

// tapCount is how many notifications of one method the upstream has written so
// far on POST streams and on GET streams.
type tapCount struct{ onPOST, onGET int }

func (c tapCount) minus(before tapCount) tapCount {
	return tapCount{onPOST: c.onPOST - before.onPOST, onGET: c.onGET - before.onGET}
}

func (u *upstreamTap) count(method string) tapCount {
	u.mu.Lock()
	defer u.mu.Unlock()
	return tapCount{onPOST: u.onPOST[method], onGET: u.onGET[method]}
}

func (u *upstreamTap) saw(method string, get bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if get {
		u.onGET[method]++
	} else {
		u.onPOST[method]++
	}
}

// eventCounter passes an event stream through and counts, as each line is
// complete, the notifications in its data lines. The count of an event is made
// before any of its bytes reach the aggregator.
type eventCounter struct {
	body    io.ReadCloser
	tap     *upstreamTap
	get     bool   // the response to a GET: the standalone stream
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
		e.tap.saw(m.Method, e.get)
	}
}

func (e *eventCounter) Close() error { return e.body.Close() }
