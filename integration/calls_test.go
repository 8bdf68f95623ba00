package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoToolsConfig serves the demo "tools" server, shared by every session, under the
// prefix demo_.
func demoToolsConfig() string {
	return `version: 1
servers:
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
}

// demoCounterConfig is demoToolsConfig and the demo counter, leased (an
// instance per session), its tools prefixed counter_.
func demoCounterConfig() string {
	return demoToolsConfig() + demoEntry("counter", "counter_", "counter")
}

// textPattern is what the demo big tool returns: "0123456789abcdef" repeated, cut to n bytes.
func textPattern(n int) string {
	const unit = "0123456789abcdef"
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// TestBigResult sends a multi-megabyte result through the aggregator.
func TestBigResult(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	want := textPattern(size)
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, demoToolsConfig())
		a.waitLoaded()
		c := a.connect()

		result := c.callToolResult("demo_big", map[string]any{"bytes": size})
		var r struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		}
		require.NoError(t, json.Unmarshal(result, &r))
		require.False(t, r.IsError)
		require.Len(t, r.Content, 1)
		assert.Equal(t, "text", r.Content[0].Type)
		assert.Equal(t, size, len(r.Content[0].Text), "text length")
		assert.True(t, r.Content[0].Text == want, "the text differs from the pattern the upstream sent")

		// The connection is still usable afterwards.
		assert.Equal(t, "after", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "after"})))
	})
}

// progressOf returns the params of the progress notifications for token among notes.
func progressOf(t testing.TB, notes []notification, token any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, n := range notes {
		if n.Method != "notifications/progress" {
			continue
		}
		params := decodeObject(t, n.Params)
		if params["progressToken"] == token {
			out = append(out, params)
		}
	}
	return out
}

// TestProgress checks that progress an upstream reports reaches the caller, under the
// caller's own token, before the response.
func TestProgress(t *testing.T) {
	t.Parallel()
	const steps = 5
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, demoToolsConfig())
		a.waitLoaded()
		c := a.connect()

		for _, tc := range []struct {
			name  string
			token any // as sent
			want  any // as decoded with UseNumber
		}{
			{"string token", "progress-" + string(tr), "progress-" + string(tr)},
			{"integer token", 4242, json.Number("4242")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := c.mustRequest("tools/call", map[string]any{
					"name":      "demo_slow",
					"arguments": map[string]any{"seconds": 0.25, "steps": steps},
					"_meta":     map[string]any{"progressToken": tc.token},
				})
				// Progress after the response would be useless to a client: take only
				// what arrived before it.
				notes, _ := c.inbox.snapshot()
				require.Empty(t, resp.Error)
				assert.Equal(t, "done after 5 steps", firstText(t, resp.Result))

				progress := progressOf(t, notes, tc.want)
				require.Len(t, progress, steps, "progress notifications received before the response: %v", notes)
				for i, p := range progress {
					assert.Equal(t, json.Number(strconv.Itoa(i+1)), p["progress"], "progress of notification %d", i+1)
					assert.Equal(t, json.Number(strconv.Itoa(steps)), p["total"])
					assert.Equal(t, fmt.Sprintf("step %d of %d", i+1, steps), p["message"])
				}
			})
		}
	})
}

// waitForFile waits until path exists and returns its content.
func waitForFile(t testing.TB, path string, timeout time.Duration) ([]byte, bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return b, true
		}
		require.ErrorIs(t, err, os.ErrNotExist)
		if time.Now().After(deadline) {
			return nil, false
		}
		<-poll.C
	}
}

// TestCancellation cancels a running call from the client and checks that the
// cancellation reaches the upstream, which notices it and stops.
func TestCancellation(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, demoToolsConfig())
		a.waitLoaded()
		c := a.connect()

		marker := filepath.Join(t.TempDir(), "cancelled")
		token := "cancel-" + string(tr)
		id := c.newID()
		ctx, stopWaiting := context.WithCancel(context.Background())
		type outcome struct {
			resp *response
			err  error
		}
		answered := make(chan outcome, 1)
		go func() {
			resp, err := c.request(ctx, id, "tools/call", map[string]any{
				"name":      "demo_slow",
				"arguments": map[string]any{"seconds": 30, "steps": 300, "marker": marker},
				"_meta":     map[string]any{"progressToken": token},
			})
			answered <- outcome{resp, err}
		}()
		defer func() {
			stopWaiting()
			<-answered
		}()

		// The first progress notification proves the call is running upstream.
		_, ok := c.waitNotification(func(n notification) bool {
			return n.Method == "notifications/progress" && len(progressOf(t, []notification{n}, token)) == 1
		}, startTimeout)
		require.True(t, ok, "no progress from the running call")

		require.NoError(t, c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "the test cancelled it"}))

		content, ok := waitForFile(t, marker, 20*time.Second)
		require.True(t, ok, "the upstream never wrote its cancellation marker: notifications/cancelled did not reach it")
		assert.Equal(t, "cancelled", string(content))
		_, ok = a.log.waitLine(func(line string) bool { return strings.Contains(line, "slow: cancelled") }, 20*time.Second, a.exited)
		assert.True(t, ok, "the upstream's stderr line \"slow: cancelled\" is not in the aggregator's log")

		// A cancelled request gets no result.
		select {
		case o := <-answered:
			answered <- o // for the deferred wait
			if o.err == nil {
				assert.Empty(t, o.resp.Result, "a cancelled call was answered with a result")
			}
		default:
		}
	})
}

// TestConcurrentCalls makes many calls at once on one connection; each must get its
// own answer.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	const calls = 32
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, demoToolsConfig())
		a.waitLoaded()
		c := a.connect()

		type outcome struct {
			text string
			err  error
		}
		results := make([]outcome, calls)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()
				text := fmt.Sprintf("call %02d over %s", i, tr)
				resp, err := c.request(ctx, c.newID(), "tools/call", map[string]any{"name": "demo_echo", "arguments": map[string]any{"text": text}})
				if err == nil && len(resp.Error) > 0 {
					err = fmt.Errorf("JSON-RPC error %s", resp.Error)
				}
				if err != nil {
					results[i] = outcome{err: err}
					return
				}
				var r struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				}
				if err := json.Unmarshal(resp.Result, &r); err != nil || len(r.Content) != 1 {
					results[i] = outcome{err: errors.Join(errors.New("unexpected result "+string(resp.Result)), err)}
					return
				}
				results[i] = outcome{text: r.Content[0].Text}
			})
		}
		close(start)
		wg.Wait()
		for i, r := range results {
			if assert.NoError(t, r.err, "call %d", i) {
				assert.Equal(t, fmt.Sprintf("call %02d over %s", i, tr), r.text, "call %d got another call's answer", i)
			}
		}
	})
}

// TestCancellationReasonReachesTheUpstream: the reason a client gives in
// notifications/cancelled is the reason the upstream is given, over stdio
// and HTTP.
func TestCancellationReasonReachesTheUpstream(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, "version: 1\nservers:\n  surface:\n    truely-stateless: true\n    "+demoServer("surface")+"\n")
		a.waitLoaded()
		c := a.connect()
		id := c.newID()
		ctx, stopWaiting := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.request(ctx, id, "tools/call", map[string]any{"name": "wait", "arguments": map[string]any{"ms": 60000}})
		}()
		defer func() {
			stopWaiting()
			<-done
		}()
		_, ok := a.log.waitLine(func(line string) bool { return strings.Contains(line, "wait: started") }, startTimeout, a.exited)
		require.True(t, ok, "the call never reached the upstream:\n%s", a.log)
		reason := "the user pressed stop (" + string(tr) + ")"
		require.NoError(t, c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": reason}))
		want := fmt.Sprintf("wait: cancelled, reason %q", reason)
		_, ok = a.log.waitLine(func(line string) bool { return strings.Contains(line, strings.ReplaceAll(want, `"`, `\"`)) }, startTimeout, a.exited)
		assert.True(t, ok, "the upstream was not given the client's reason (%s):\n%s", want, a.log)
	})
}
