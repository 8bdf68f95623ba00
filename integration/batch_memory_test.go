package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchMemoryBounded: one JSON-RPC batch of a hundred calls that each
// answer 2 MiB costs the gateway a bounded amount of memory, not the sum
// of the answers held and copied (over a GiB before): a client that
// accepts only JSON gets the answers that fit http.max_batch_bytes and,
// for each other call, an error naming that limit; a client that accepts
// text/event-stream gets every answer, streamed as the calls finish, while
// another call of the same batch is still running.
func TestBatchMemoryBounded(t *testing.T) {
	t.Parallel()
	const (
		calls     = 100
		size      = 2 << 20
		maxHeld   = 16 << 20 // DefaultMaxBatchBytes
		bound     = 200 * MiB
		batchVers = "2025-03-26"
	)
	a := startAggregator(t, httpTransport, aggregatorOptions{exe: corePlainBinary(t),
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))}})
	a.waitLoaded()
	session := newBatchClient(t, a, batchVers).session
	require.NotEmpty(t, session)

	// post sends a batch and returns the response, whose reading is
	// bounded by batchTimeout: a stream of 200 MiB of answers, decoded
	// by a client under the race detector on a busy machine, can take
	// longer than one call's bound.
	const batchTimeout = 5 * time.Minute
	post := func(body, accept string) *http.Response {
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", batchVers)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp
	}
	bigCalls := func(first, n int) []string {
		var members []string
		for i := range n {
			members = append(members, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, first+i, size))
		}
		return members
	}
	batch := "[" + strings.Join(bigCalls(1, calls), ",") + "]"
	// checkBig checks an answer of a big call and reports whether it is a result.
	checkBig := func(r batchReply) bool {
		if r.Error != nil {
			assert.Equal(t, -32603, r.Error.Code)
			for _, hint := range []string{"http.max_batch_bytes", "on its own", "text/event-stream"} {
				assert.Contains(t, r.Error.Message, hint)
			}
			return false
		}
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.Len(t, res.Content, 1)
		assert.Len(t, res.Content[0].Text, size)
		return true
	}
	base, _ := coreResetPeak(t, corePID(a))

	// JSON only: the answers that fit, and an error for each other call.
	resp := post(batch, "application/json")
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var replies []batchReply
	require.NoError(t, json.Unmarshal(raw, &replies), "%.300s", raw)
	ids, results := map[string]bool{}, 0
	for _, r := range replies {
		ids[string(r.ID)] = true
		if checkBig(r) {
			results++
		}
	}
	assert.Len(t, ids, calls, "one answer per call")
	assert.Positive(t, results, "the answers that fit are given")
	assert.LessOrEqual(t, results*size, maxHeld, "no more than http.max_batch_bytes of answers")
	t.Logf("JSON: %d results of %d MiB, %d errors; peak RSS grew by %.1f MiB", results, size>>20, calls-results, float64(coreGrowth(t, corePID(a), base))/MiB)

	// SSE: every answer, as an event of its own.
	resp = post(batch, "application/json, text/event-stream")
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.Equal(t, "text/event-stream", mt)
	ids = map[string]bool{}
	require.NoError(t, readSSE(resp.Body, func(data []byte) bool {
		var r batchReply
		require.NoError(t, json.Unmarshal(data, &r), "%.300s", data)
		ids[string(r.ID)] = true
		assert.True(t, checkBig(r), "a streamed answer is the call's result")
		return true
	}))
	assert.Len(t, ids, calls, "every call is answered on the stream")

	// Streamed as they come: the big calls' answers arrive while a slow call
	// of the same batch still runs; cancelling it then ends the stream.
	const bigs = 9 // more than http.max_batch_bytes holds
	members := append([]string{`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{"seconds":600,"steps":1}}}`}, bigCalls(1000, bigs)...)
	resp = post("["+strings.Join(members, ",")+"]", "application/json, text/event-stream")
	got := 0
	require.NoError(t, readSSE(resp.Body, func(data []byte) bool {
		var r batchReply
		require.NoError(t, json.Unmarshal(data, &r), "%.300s", data)
		require.NotEqual(t, `"slow"`, string(r.ID), "the slow call ended: %s", data)
		assert.True(t, checkBig(r))
		got++
		return got < bigs
	}))
	require.Equal(t, bigs, got, "the stream ended before the big calls' answers")
	cancelled := coreMessageBody(t, a, session, batchVers, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`)
	assert.Equal(t, http.StatusAccepted, cancelled)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends once its last call is cancelled")
	assert.NotContains(t, string(bytes.TrimSpace(rest)), `"id":"slow"`, "a cancelled call is not answered")

	growth := coreGrowth(t, corePID(a), base)
	t.Logf("batches of %d calls answering %d MiB each: peak RSS grew by %.1f MiB", calls, size>>20, float64(growth)/MiB)
	assert.Less(t, growth, int64(bound), "a batch's answers raised the peak RSS by %.1f MiB", float64(growth)/MiB)
}

// coreMessageBody POSTs one message in session and returns the status.
func coreMessageBody(t *testing.T, a *aggregator, session, version, body string) int {
	t.Helper()
	r := corePost(t, a.url, session, []byte(body), map[string]string{"MCP-Protocol-Version": version})
	return r.status
}

// TestBatchBoundFromConfig: http.max_batch_bytes sets the bound on a
// batch's array, and a reload that changes it is followed.
func TestBatchBoundFromConfig(t *testing.T) {
	t.Parallel()
	configFor := func(bound int) string {
		return fmt.Sprintf("version: 1\nhttp: {max_batch_bytes: %d}\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", bound, demoServer("tools"))
	}
	path := writeConfig(t, configFor(1024))
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()
	c := newBatchClient(t, a, "2025-03-26")
	text := strings.Repeat("x", 600)
	batch := "[" + strings.Join([]string{
		fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, text),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, text),
	}, ",") + "]"
	// A client that accepts only JSON gets errors past the bound (one that
	// accepts a stream would get the answers streamed).
	send := func() []byte {
		r := corePost(t, a.url, c.session, []byte(batch), map[string]string{"Accept": "application/json", "MCP-Protocol-Version": "2025-03-26"})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.body
	}
	errorsIn := func(raw []byte) (n int) {
		var replies []batchReply
		require.NoError(t, json.Unmarshal(raw, &replies), "%s", raw)
		require.Len(t, replies, 2, "%s", raw)
		for _, r := range replies {
			if r.Error != nil {
				assert.Contains(t, r.Error.Message, "past 1024 bytes (http.max_batch_bytes)")
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, errorsIn(send()), "one echo's answer fits in 1024 bytes, not two")

	require.NoError(t, os.WriteFile(path, []byte(configFor(1<<20)), 0o644))
	_, ok := a.log.waitLine(func(line string) bool { return strings.Contains(line, `msg="reload done"`) }, startTimeout, a.exited)
	require.True(t, ok, "the config was never reloaded; stderr:\n%s", a.log)
	assert.Zero(t, errorsIn(send()), "the raised bound holds both")
}
