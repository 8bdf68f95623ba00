package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// batchFake answers initialize with protocol 2025-03-26, the one with
// batches, and every other request with serve's answer.
func batchFake(serve func(ctx context.Context, req *Request) *jsonrpc.Message) *httpFake {
	f := newHTTPFake()
	f.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)}
		}
		return serve(ctx, req)
	}
	return f
}

// batchOf is a batch of n pings with ids from 1.
func batchOf(n int) string {
	members := make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1)
	}
	return "[" + strings.Join(members, ",") + "]"
}

// bigResult answers with a string result of n bytes.
func bigResult(n int) func(context.Context, *Request) *jsonrpc.Message {
	return func(context.Context, *Request) *jsonrpc.Message {
		return &jsonrpc.Message{Result: json.RawMessage(`"` + strings.Repeat("x", n) + `"`)}
	}
}

func (s *httpServer) batchPost(t *testing.T, session, body, accept string) *http.Response {
	t.Helper()
	return s.post(t, body, map[string]string{headerSessionID: session, headerProtocol: batchProtocol, "Accept": accept})
}

// batchAnswers decodes body, a batch's array of answers, and returns the
// ids answered and how many answers are results; refused checks each error.
func batchAnswers(t *testing.T, body []byte, refused func(*jsonrpc.Error)) (ids map[string]bool, results int) {
	t.Helper()
	var answers []*jsonrpc.Message
	require.NoError(t, json.Unmarshal(body, &answers), "%.200s", body)
	ids = map[string]bool{}
	for _, a := range answers {
		ids[string(a.ID)] = true
		if a.Error == nil {
			results++
			continue
		}
		refused(a.Error)
	}
	return ids, results
}

// The answers held for a JSON array stop at MaxBatchBytes: each answer
// past it is an error naming the bound and the ways around it.
func TestBatchHoldsAtMostMaxBatchBytes(t *testing.T) {
	const size = 1000 // each answer: a bit more than this
	s := serveHTTP(t, batchFake(bigResult(size)), HTTPOptions{MaxBatchBytes: 3500})
	id := s.initialize(t)
	resp := s.batchPost(t, id, batchOf(10), "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	ids, results := batchAnswers(t, body, func(e *jsonrpc.Error) {
		assert.Equal(t, jsonrpc.CodeInternalError, e.Code)
		for _, hint := range []string{"past 3500 bytes (http.max_batch_bytes)", "send the request on its own", "accept text/event-stream", "raise http.max_batch_bytes"} {
			assert.Contains(t, e.Message, hint)
		}
	})
	assert.Len(t, ids, 10, "every request is answered")
	assert.Equal(t, 3, results, "as many answers as fit")

	s.tr.SetMaxBatchBytes(1 << 20)
	resp = s.batchPost(t, id, batchOf(10), "application/json")
	var all []*jsonrpc.Message
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&all))
	resp.Body.Close()
	assert.Len(t, all, 10)
	for _, a := range all {
		assert.Nil(t, a.Error, "a raised bound holds them all")
	}
}

// A client that accepts a stream gets every answer, streamed once they
// would pass MaxBatchBytes.
func TestBatchStreamsPastMaxBatchBytes(t *testing.T) {
	s := serveHTTP(t, batchFake(bigResult(1000)), HTTPOptions{MaxBatchBytes: 3500})
	id := s.initialize(t)
	resp := s.batchPost(t, id, batchOf(10), "application/json, text/event-stream")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := newSSE(resp.Body)
	ids := map[string]bool{}
	for {
		m, err := events.next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		assert.Nil(t, m.Error)
		ids[string(m.ID)] = true
	}
	assert.Len(t, ids, 10)

	// Small answers that all fit still come as one array.
	s.tr.SetMaxBatchBytes(1 << 20)
	resp = s.batchPost(t, id, batchOf(10), "application/json, text/event-stream")
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
}

// A client that accepts only a stream gets each answer as soon as its
// request is served, not once the slowest of the batch is.
func TestBatchStreamsAnswersAsTheyCome(t *testing.T) {
	release := make(chan struct{})
	s := serveHTTP(t, batchFake(func(ctx context.Context, req *Request) *jsonrpc.Message {
		if string(req.Msg.ID) == `"slow"` {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
	}), HTTPOptions{})
	id := s.initialize(t)
	// Bounded, for a transport that holds the quick answer back: it would
	// wait for the slow one forever.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url,
		strings.NewReader(`[{"jsonrpc":"2.0","id":"slow","method":"ping"},{"jsonrpc":"2.0","id":"quick","method":"ping"}]`))
	require.NoError(t, err)
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"},
		headerSessionID: {id}, headerProtocol: {batchProtocol}}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := newSSE(resp.Body)
	first, err := events.next()
	require.NoError(t, err, "no answer before the slow request's")
	assert.Equal(t, `"quick"`, string(first.ID), "the quick answer comes while the slow request runs")
	close(release)
	second, err := events.next()
	require.NoError(t, err)
	assert.Equal(t, `"slow"`, string(second.ID))
	_, err = events.next()
	assert.Equal(t, io.EOF, err, "the stream ends with the last answer")
}

// At most batchConcurrency requests of one batch are served at once.
func TestBatchServesABoundedNumberAtOnce(t *testing.T) {
	var (
		mu            sync.Mutex
		running, most int
		entered       = make(chan struct{}, MaxBatch)
		release       = make(chan struct{})
	)
	s := serveHTTP(t, batchFake(func(ctx context.Context, req *Request) *jsonrpc.Message {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		mu.Lock()
		running--
		mu.Unlock()
		return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
	}), HTTPOptions{})
	id := s.initialize(t)
	const n = 3 * batchConcurrency
	done := make(chan []*jsonrpc.Message, 1)
	go func() {
		resp := s.batchPost(t, id, batchOf(n), "application/json")
		defer resp.Body.Close()
		var answers []*jsonrpc.Message
		assert.NoError(t, json.NewDecoder(resp.Body).Decode(&answers))
		done <- answers
	}()
	// Let the requests through one at a time: each release lets one end
	// and, while any wait, one more start.
	for i := range n {
		recv(t, entered)
		if i >= batchConcurrency-1 {
			release <- struct{}{}
		}
	}
	for range batchConcurrency - 1 {
		release <- struct{}{}
	}
	answers := recv(t, done)
	assert.Len(t, answers, n)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, batchConcurrency, most, "requests served at once")
}
