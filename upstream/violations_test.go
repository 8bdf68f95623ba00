package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// callPing calls the misbehave server's ping_tool with a deadline far
// beyond what an answer takes, and says how long the call took.
func callPing(t *testing.T, inst *Instance) (json.RawMessage, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	began := time.Now()
	raw, err := inst.CallTool(ctx, Call{Name: "ping_tool", Arguments: json.RawMessage(`{}`)})
	require.NoError(t, ctx.Err(), "the call ran into its deadline")
	return raw, time.Since(began), err
}

// TestByteOrderMarkIsNotPartOfTheMessage: a server whose stdout starts with
// a UTF-8 byte order mark still starts and answers.
func TestByteOrderMarkIsNotPartOfTheMessage(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	inst := startDemo(t, "misbehave bom", Options{Logger: rec.Logger()})
	raw, _, err := callPing(t, inst)
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[{"type":"text","text":"pong"}]}`, string(raw))
	assert.False(t, rec.Has("not JSON-RPC"), "the byte order mark was taken for part of a message")
}

// TestUpstreamBatchIsTaken: a server that answers with a JSON-RPC batch,
// as protocol 2025-03-26 allows, has each message in it taken as if it came
// alone: the notification is heard, the response answers its call.
func TestUpstreamBatchIsTaken(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	heard := make(chan Notification, 1)
	inst := startDemo(t, "misbehave batch-answer", Options{Logger: rec.Logger(),
		OnNotification: func(_ *Instance, n Notification) { heard <- n }})
	raw, _, err := callPing(t, inst)
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[{"type":"text","text":"pong"}]}`, string(raw))
	select {
	case n := <-heard:
		assert.Equal(t, "notifications/message", n.Method)
		assert.JSONEq(t, `{"level":"info","data":"batched"}`, string(n.Params))
	case <-time.After(waitTimeout):
		t.Fatal("the batch's notification was not heard")
	}
	assert.False(t, rec.Has("not JSON-RPC"), "the batch was taken for junk")
}

// TestStringIDFailsItsCallAtOnce: a server that writes the integer id of a
// request back as a string has not answered it (JSON-RPC wants the id as
// sent), but the call fails at once, saying why, rather than at its
// deadline; the instance keeps serving.
func TestStringIDFailsItsCallAtOnce(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	inst := startDemo(t, "misbehave string-id", Options{Logger: rec.Logger()})
	_, took, err := callPing(t, inst)
	require.Error(t, err)
	assert.Less(t, took, 5*time.Second)
	assert.Regexp(t, `^server "misbehave" answered request \d+ with the id "\d+", a string; JSON-RPC 2.0 requires the id exactly as sent`, err.Error())
	assert.False(t, rec.Has("never sent"))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, inst.Ping(ctx), "the instance still serves")
}

// TestMalformedResponseFailsItsCallAtOnce: a response that names the id of
// a call but is not valid JSON-RPC fails that call at once, saying so,
// rather than leaving it to its deadline; the instance keeps serving.
func TestMalformedResponseFailsItsCallAtOnce(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	inst := startDemo(t, "misbehave bad-error", Options{Logger: rec.Logger()})
	_, took, err := callPing(t, inst)
	require.Error(t, err)
	assert.Less(t, took, 5*time.Second)
	assert.Contains(t, err.Error(), `server "misbehave" sent a malformed response`)
	assert.Contains(t, err.Error(), "malformed error object")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, inst.Ping(ctx), "the instance still serves")
}

// TestResultThatIsNotAnObjectFails: a result that is not a JSON object (as
// every MCP result is) fails the call with an error naming the server and
// what it sent, rather than being relayed.
func TestResultThatIsNotAnObjectFails(t *testing.T) {
	t.Parallel()
	for mode, kind := range map[string]string{"null-result": "null", "array-result": "an array"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			inst := startDemo(t, "misbehave "+mode, Options{})
			raw, _, err := callPing(t, inst)
			require.Error(t, err, "result relayed: %s", raw)
			assert.Equal(t, `server "misbehave": its result for tools/call is `+kind+
				`, not a JSON object; the server does not follow the MCP schema, report it to its maintainers`, err.Error())
			assert.False(t, Transient(err))
		})
	}
}

// startFails starts spec and returns why it failed, which it must, well
// before the connect timeout.
func startFails(t *testing.T, spec string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	began := time.Now()
	inst, err := Start(ctx, demoServer(strings.Fields(spec)[0], spec), Options{Logger: newLogRecorder().Logger()})
	if err == nil {
		_ = inst.Close()
		t.Fatalf("%s started", spec)
	}
	assert.Less(t, time.Since(began), 5*time.Second, "the start failed only at its deadline")
	return err
}

// TestUnknownProtocolVersionFailsTheStart: an initialize answered with a
// protocol version the handshake cannot have negotiated fails the start,
// naming the version and the fix, for good (no retry).
func TestUnknownProtocolVersionFailsTheStart(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"1999-01-01", "2026-07-28", ""} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			spec := "misbehave init-version " + version
			if version == "" {
				spec = "misbehave init-version 2025-11-25-extra"
				version = "2025-11-25-extra"
			}
			err := startFails(t, spec)
			assert.Contains(t, err.Error(), `server "misbehave": initialize: the server answered with protocol version "`+version+`"`)
			assert.Contains(t, err.Error(), "2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05")
			assert.Contains(t, err.Error(), "set protocol:")
			assert.False(t, Transient(err))
		})
	}
	t.Run("an older version it knows", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "misbehave init-version 2025-03-26", Options{})
		assert.Equal(t, "2025-03-26", inst.Protocol())
	})
}

// TestPaginationLoopFailsAtOnce: a tools/list whose cursors come back to an
// earlier page fails the start when the loop shows, not after the page
// limit, and for good.
func TestPaginationLoopFailsAtOnce(t *testing.T) {
	t.Parallel()
	err := startFails(t, "misbehave cursor-cycle")
	assert.Equal(t, `server "misbehave": tools/list: page 3 names the cursor "a" of an earlier page as the next one; the server's pagination loops (fix its cursors, or have it list everything on one page)`, err.Error())
	assert.False(t, Transient(err))
}

// listConn answers tools/list with one fixed page.
type listConn struct{ page string }

func (c *listConn) call(context.Context, string, any) (json.RawMessage, error) {
	return json.RawMessage(c.page), nil
}
func (c *listConn) notify(context.Context, string, any) error { return nil }
func (c *listConn) done() <-chan struct{}                     { return nil }
func (c *listConn) err() error                                { return nil }
func (c *listConn) close() error                              { return nil }

// TestToolsThatBreakTheSchemaAreLeftOut: a tool whose inputSchema (or
// outputSchema) is not a JSON Schema object of type "object" is left out of
// the list, with one warning per reason naming the tools; the other tools
// stay exactly as sent.
func TestToolsThatBreakTheSchemaAreLeftOut(t *testing.T) {
	t.Parallel()
	good := `{"name":"good","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":18446744073709551616}}}}`
	noOutput := `{"name":"no_output","inputSchema":{"type":"object"},"outputSchema":null}`
	withOutput := `{"name":"with_output","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}`
	page := `{"tools":[` + good + `,` + noOutput + `,` + withOutput + `,
		{"name":"missing"},
		{"name":"missing2","inputSchema":null},
		{"name":"text","inputSchema":"object"},
		{"name":"array","inputSchema":{"type":"array"}},
		{"name":"untyped","inputSchema":{}},
		{"name":"bad_output","inputSchema":{"type":"object"},"outputSchema":{"type":"string"}},
		{"inputSchema":{"type":"object"}}]}`
	rec := newLogRecorder()
	inst := &Instance{server: "schemas", conn: &listConn{page: page}, log: rec.Logger()}
	tools, err := inst.ListTools(context.Background())
	require.NoError(t, err)
	require.Len(t, tools, 3)
	for n, want := range []string{good, noOutput, withOutput} {
		assert.JSONEq(t, want, string(tools[n].Raw))
		assert.Equal(t, want, string(tools[n].Raw), "the bytes as sent")
	}
	for _, want := range []string{
		"left out (its inputSchema is missing) server=schemas method=tools/list count=1 names=missing",
		`left out (its inputSchema is null, not a JSON Schema object) server=schemas method=tools/list count=1 names=missing2`,
		`left out (its inputSchema is a string, not a JSON Schema object) server=schemas method=tools/list count=1 names=text`,
		`left out (its inputSchema does not have "type": "object") server=schemas method=tools/list count=2 names=array, untyped`,
		`left out (its outputSchema does not have "type": "object") server=schemas method=tools/list count=1 names=bad_output`,
		"left out (no name) server=schemas method=tools/list count=1",
	} {
		assert.True(t, rec.Has(want), "no log line %q in:\n%s", want, strings.Join(rec.Lines(), "\n"))
	}
}

// TestRemoteRequestAcceptedWithoutAnswerFails: a request answered with 202
// Accepted and no body fails at once, saying what the server did.
func TestRemoteRequestAcceptedWithoutAnswerFails(t *testing.T) {
	t.Parallel()
	f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, _ *jsonrpc.Message) {
		w.WriteHeader(http.StatusAccepted)
	}}}
	inst := startSessionRemote(t, f, nil, Options{})
	_, err := inst.CallTool(testContext(t), Call{Name: "t"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "it answered tools/call with HTTP 202 Accepted and no response")
}

// TestUnansweredSetLevelDoesNotFailTheStart: a server that declares logging
// but never answers logging/setLevel starts all the same, within its
// connect budget, and the wait is said in the log.
func TestUnansweredSetLevelDoesNotFailTheStart(t *testing.T) {
	t.Parallel()
	const budget = 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	rec := newLogRecorder()
	inst, err := Start(ctx, demoServer("misbehave", "misbehave hang-setlevel"), Options{Logger: rec.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	require.Len(t, inst.Tools(), 1)
	assert.Equal(t, "ping_tool", inst.Tools()[0].Name)
	rec.WaitFor(t, "did not answer logging/setLevel debug in time")
}

// TestRemoteWithoutGETStreamIsNoError: a server that answers the GET stream
// with 405, as the protocol allows, is not logged as an error.
func TestRemoteWithoutGETStreamIsNoError(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	f := &sessionRemote{get: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) }}
	inst := startSessionRemote(t, f, nil, Options{Logger: rec.Logger()})
	rec.WaitFor(t, "INFO server offers no GET stream (HTTP 405)")
	assert.False(t, rec.Has("ERROR"), "logged:\n%s", strings.Join(rec.Lines(), "\n"))
	require.NoError(t, inst.Ping(testContext(t)))
}

// TestRemoteFailingGETStreamIsLoggedOnce: a server whose GET stream keeps
// failing (HTTP 503, or an event over the size limit), which is opened
// again every second, is logged at its first failure and then at most once
// a minute, not once a second; the connection still serves.
func TestRemoteFailingGETStreamIsLoggedOnce(t *testing.T) {
	t.Parallel()
	const attempts = 5
	for _, tc := range []struct {
		name  string
		get   func(w http.ResponseWriter)
		lines []string // the kinds of line logged about each failure
	}{
		{"status 503", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
			[]string{"503"}},
		{"oversized event", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+strings.Repeat("x", 8<<10)+"\n\n")
		}, []string{"over the size limit on its stream"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newLogRecorder()
			gets := make(chan struct{}, 100)
			f := &sessionRemote{get: func(w http.ResponseWriter, _ *http.Request) {
				tc.get(w)
				gets <- struct{}{}
			}}
			inst := startSessionRemote(t, f, nil, Options{Logger: rec.Logger(), MaxMessage: 4 << 10})
			// The failures of every GET but the last are logged (or left out)
			// before the next one is opened.
			for range attempts {
				select {
				case <-gets:
				case <-time.After(waitTimeout):
					t.Fatal("the GET stream was not opened again")
				}
			}
			lines := rec.Lines()
			for _, kind := range tc.lines {
				n := 0
				for _, l := range lines {
					if strings.Contains(l, kind) {
						n++
					}
				}
				assert.Equal(t, 1, n, "%d GET streams failed; %q logged %d times:\n%s", attempts, kind, n, strings.Join(lines, "\n"))
			}
			require.NoError(t, inst.Ping(testContext(t)))
		})
	}
}

// TestStdoutJunkWarningsAreBounded: a server that writes to stdout without
// end what is for no call (lines that are not JSON-RPC, answers to ids never
// sent) gets a bounded number of warnings, and the number left out said.
func TestStdoutJunkWarningsAreBounded(t *testing.T) {
	const lines = 20 * junkBurst
	rec := newLogRecorder()
	c := &stdioConn{server: "chatty", log: rec.Logger(), pending: map[int64]waiter{}}
	for i := range lines / 2 {
		c.dispatch(fmt.Appendf(nil, "progress %d%%", i))
		c.dispatch(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{}}`, 1000+i))
	}
	// What read does when stdout ends.
	c.junkBudget.report(time.Now(), true, c.log, c.server, junkLeftOut)
	warned, leftOut := 0, 0
	for _, l := range rec.Lines() {
		switch {
		case strings.Contains(l, "not JSON-RPC; ignored"), strings.Contains(l, "never sent; ignored"):
			warned++
		case strings.HasPrefix(l, "WARN "+junkLeftOut+" server=chatty left_out="):
			var n int
			_, err := fmt.Sscanf(l[strings.Index(l, "left_out=")+len("left_out="):], "%d", &n)
			require.NoError(t, err, l)
			leftOut += n
		}
	}
	assert.GreaterOrEqual(t, warned, junkBurst, "the first ones are said")
	assert.Less(t, warned, lines/4, "the flood is not")
	assert.Equal(t, lines, warned+leftOut, "every one is warned of or counted")
}

// TestProgressThatGoesBackIsDropped: MCP wants each progress notification of
// a call to increase. Those that do not (a server wrote them so, or they came
// over two streams in no set order) are dropped; the rest are handed on in
// order, byte for byte but for the caller's token.
func TestProgressThatGoesBackIsDropped(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "misbehave progress-backwards", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	progress := newProgressLog()
	raw, err := inst.CallTool(ctx, Call{Name: "ping_tool", Arguments: json.RawMessage(`{}`),
		ProgressToken: json.RawMessage(`"mine"`), OnProgress: progress.add})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[{"type":"text","text":"pong"}]}`, string(raw))
	got := progress.all()
	require.Len(t, got, 3, "progress handed on: %s", got)
	for i, want := range []int{1, 3, 4} {
		assert.JSONEq(t, fmt.Sprintf(`{"progressToken":"mine","progress":%d,"total":4}`, want), string(got[i]))
	}
}
