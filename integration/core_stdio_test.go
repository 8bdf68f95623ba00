package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCoreStdioClientStopsReading: a stdio client that writes 20,000 tools/call
// requests and never reads stdout must not make the aggregator buffer their results:
// its RSS grows by less than 200 MiB (issue 10: 2.3 GB for 20,000 results).
func TestCoreStdioClientStopsReading(t *testing.T) {
	t.Parallel()
	const (
		requests    = 20000
		resultBytes = 20000 // per result: 400 MB if every result were kept
		bound       = 200 * MiB
		// stalled is how long the client's writes must make no progress for the
		// aggregator to count as having stopped reading.
		stalled = 3 * time.Second
		// watch bounds the whole observation.
		watch = 40 * time.Second
	)
	a := coreServePlain(t, stdioTransport, demoToolsConfig())
	a.waitLoaded()
	base, _ := coreResetPeak(t, corePID(a))

	var written atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		lines := []string{
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + protocolVersion + `","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		}
		for _, l := range lines {
			if _, err := io.WriteString(a.stdin, l+"\n"); err != nil {
				writerDone <- err
				return
			}
		}
		for i := 1; i <= requests; i++ {
			line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"demo_big","arguments":{"bytes":%d}}}`+"\n", i, resultBytes)
			if _, err := io.WriteString(a.stdin, line); err != nil {
				writerDone <- err
				return
			}
			written.Add(1)
		}
		writerDone <- nil
	}()

	// Watch the aggregator until it has stopped reading (the writes stall) or has
	// taken every request, failing as soon as its memory passes the bound.
	var growth int64
	lastCount, lastMove := int64(-1), time.Now()
	deadline := time.Now().Add(watch)
	finished := false
	var finishedAt time.Time
	for time.Now().Before(deadline) {
		growth = coreGrowth(t, corePID(a), base)
		if growth >= bound {
			break
		}
		if n := written.Load(); n != lastCount {
			lastCount, lastMove = n, time.Now()
		}
		if !finished {
			select {
			case err := <-writerDone:
				require.NoError(t, err, "writing the requests")
				finished, finishedAt = true, time.Now()
			default:
			}
		}
		if !finished && time.Since(lastMove) > stalled {
			break // the aggregator applies backpressure: the client's writes block
		}
		if finished && time.Since(finishedAt) > 2*stalled {
			break // it took everything; its memory had time to show it
		}
		time.Sleep(100 * time.Millisecond) // sampling memory: no event to wait on
	}
	t.Logf("the aggregator took %d of %d requests (all: %v) with no reader; RSS +%.1f MiB", lastCount, requests, finished, float64(growth)/MiB)
	assert.Less(t, growth, int64(bound), "the aggregator's RSS grew by %.1f MiB for a client that does not read", float64(growth)/MiB)

	// Let it finish: stop writing, read what it has to say, and let stop (at
	// cleanup) check the exit.
	_ = a.stdin.Close()
	go func() { _, _ = io.Copy(io.Discard, a.stdout) }()
}

// coreInvalidCases are requests that are not valid JSON-RPC 2.0: an id that is not
// a string or an integer, or a jsonrpc member that is not "2.0". Each would
// increment the counter if it ran; keys are the ids the error response may carry.
var coreInvalidCases = []struct {
	name string
	body string
	ids  []string // "null", or the request's own id when that one is valid
}{
	{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null"}},
	{"object id", `{"jsonrpc":"2.0","id":{"n":1},"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null"}},
	{"array id", `{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null"}},
	{"bool id", `{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null"}},
	{"float id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null"}},
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7001,"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null", "7001"}},
	{"no jsonrpc", `{"id":7002,"method":"tools/call","params":{"name":"c_increment","arguments":{}}}`, []string{"null", "7002"}},
}

// coreStdioRaw writes one raw line and waits for the response carrying any of ids.
func coreStdioRaw(t *testing.T, w *stdioWire, body string, ids []string) *response {
	t.Helper()
	ch := make(chan *response, 1)
	w.mu.Lock()
	for _, id := range ids {
		w.pending[id] = ch
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		for _, id := range ids {
			delete(w.pending, id)
		}
		w.mu.Unlock()
	}()
	require.NoError(t, w.write([]byte(body)))
	select {
	case r := <-ch:
		return r
	case <-w.done:
		t.Fatalf("stdout closed before the response to %s", body)
	case <-time.After(callTimeout):
		t.Fatalf("no response with id %v to %s within %s", ids, body, callTimeout)
	}
	return nil
}

// TestCoreInvalidRequests: ids of type null, object, array, bool or float, and a
// jsonrpc other than "2.0", get -32600 over stdio and HTTP, and the tool does not run
// (issue 10: they were accepted and ran the tool).
func TestCoreInvalidRequests(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, fmt.Sprintf(`version: 1
servers:
  counter:
    truely-stateless: true
    %s
    transform: [{prefix: c_}]
`, demoServer("counter")))
		a.waitLoaded()
		c := a.connect()
		for _, tc := range coreInvalidCases {
			var errObj json.RawMessage
			switch tr {
			case stdioTransport:
				r := coreStdioRaw(t, c.wire.(*stdioWire), tc.body, tc.ids)
				assert.Empty(t, r.Result, "%s: the request got a result", tc.name)
				errObj = r.Error
			case httpTransport:
				r := corePost(t, a.url, coreSessionOf(t, c), []byte(tc.body), nil)
				if !assert.Contains(t, []int{http.StatusOK, http.StatusBadRequest}, r.status,
					"%s: HTTP %d %.300s", tc.name, r.status, r.body) {
					continue
				}
				m := coreMessage(t, r)
				t.Logf("%s: HTTP %d %s", tc.name, r.status, bytes.TrimSpace(r.body))
				assert.Empty(t, m.Result, "%s: the request got a result", tc.name)
				assert.Contains(t, tc.ids, idKey(m.ID), "%s: the error response's id", tc.name)
				errObj = m.Error
			}
			assert.Equal(t, -32600, coreErrorCode(errObj), "%s: want an Invalid Request error, got %s", tc.name, errObj)
		}
		assert.Equal(t, 0, coreCounterValue(t, c, "c_get"), "an invalid request ran the tool")

		// The same request with a valid id does run: the cases above failed for
		// their id or version alone.
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		resp, err := c.request(ctx, c.newID(), "tools/call", map[string]any{"name": "c_increment", "arguments": map[string]any{}})
		require.NoError(t, err)
		require.Empty(t, resp.Error)
		assert.Equal(t, 1, coreCounterValue(t, c, "c_get"))
	})
}
