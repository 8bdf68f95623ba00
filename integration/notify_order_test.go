package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/require"
)

// burstTool is the tool of startOrderedUpstream: it sends n log messages and,
// when the call has a progress token, n progress notifications, alternating,
// and answers right after the last one.
const burstTool = "burst"

// burstOutcome is what one call of burstTool delivered before its response.
type burstOutcome struct {
	complete bool   // every notification arrived, in order
	got      string // what arrived, compactly: L0 P1 L1 P2 ...
}

// callBurst calls burstTool with n and a progress token and returns what the
// client received before the response: over HTTP, on the call's own stream
// (the test client opens no GET stream); over stdio, on the connection.
func callBurst(t *testing.T, c *client, name string, n int) burstOutcome {
	t.Helper()
	got := burstNotes(t, c, name, map[string]any{"n": n})
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("L%d", i), fmt.Sprintf("P%d", i+1))
	}
	return burstOutcome{complete: slices.Equal(got, want), got: strings.Join(got, " ")}
}

// burstNotes calls the tool with args and the progress token "tok" and returns
// the notifications the client received before the response, in arrival order,
// as noteTokens.
func burstNotes(t *testing.T, c *client, name string, args map[string]any) []string {
	t.Helper()
	before, _ := c.inbox.snapshot()
	resp := c.mustRequest("tools/call", map[string]any{
		"name": name, "arguments": args, "_meta": map[string]any{"progressToken": "tok"},
	})
	require.Empty(t, resp.Error, "tools/call %s", name)
	after, _ := c.inbox.snapshot()
	return noteTokens(after[len(before):])
}

// noteTokens names each notification by what identifies it: a log message by
// its data ("L" and the raw JSON), a progress notification by its progress
// ("P" and the raw number; "P?" and the token when the token is not "tok").
func noteTokens(notes []notification) []string {
	out := make([]string, 0, len(notes))
	for _, note := range notes {
		var p struct {
			Data     json.RawMessage `json:"data"`
			Progress json.RawMessage `json:"progress"`
			Token    json.RawMessage `json:"progressToken"`
		}
		_ = json.Unmarshal(note.Params, &p)
		switch {
		case note.Method == "notifications/message":
			out = append(out, "L"+string(p.Data))
		case note.Method == "notifications/progress" && string(p.Token) == `"tok"`:
			out = append(out, "P"+string(p.Progress))
		case note.Method == "notifications/progress":
			out = append(out, "P?"+string(p.Token))
		default:
			out = append(out, note.Method)
		}
	}
	return out
}

// startOrderedUpstream serves a minimal streamable-HTTP MCP server that keeps
// the transport's ordering rule to the letter: a call's notifications go on the
// call's own response stream, each written and flushed before the response, and
// nothing goes on the standalone GET stream, which it holds open. Its one tool
// is burstTool.
func startOrderedUpstream(t *testing.T) string {
	t.Helper()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		case http.MethodDelete:
			w.WriteHeader(http.StatusOK)
			return
		case http.MethodPost:
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m message
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if len(m.ID) == 0 || m.Method == "" { // a notification or a response
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer := func(result any) []byte {
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
			return b
		}
		var result any = map[string]any{}
		switch m.Method {
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(m.Params, &p)
			w.Header().Set("Mcp-Session-Id", "ordered-session")
			result = map[string]any{"protocolVersion": p.ProtocolVersion,
				"capabilities": map[string]any{"tools": map[string]any{}, "logging": map[string]any{}},
				"serverInfo":   map[string]any{"name": "ordered", "version": "1.0.0"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": burstTool,
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}}}
		case "tools/call":
			var p struct {
				Arguments struct {
					N int `json:"n"`
				} `json:"arguments"`
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			event := func(data []byte) {
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
				w.(http.Flusher).Flush()
			}
			for i := range p.Arguments.N {
				event([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"burst","data":%d}}`, i)))
				if len(p.Meta.Token) > 0 {
					event([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":%d}}`,
						p.Meta.Token, i+1, p.Arguments.N)))
				}
			}
			event(answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}}))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer(result))
	})
	return serveHTTP(t, handler) + "/mcp"
}

// TestCallNotificationsBeforeResponse: every notification an upstream sends on a
// call's response stream reaches the client in the order sent and before the
// call's response, on the call's own stream (HTTP) or the connection (stdio),
// with the upstream shared and leased.
func TestCallNotificationsBeforeResponse(t *testing.T) {
	t.Parallel()
	const calls, n = 40, 8
	for _, shared := range []bool{true, false} {
		mode := map[bool]string{true: "shared", false: "leased"}[shared]
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			eachTransport(t, func(t *testing.T, tr transport) {
				url := startOrderedUpstream(t)
				a := serveConfig(t, tr, fmt.Sprintf("version: 1\nservers:\n  ordered:\n    url: %s\n    truely-stateless: %t\n", quoted(url), shared))
				a.waitLoaded()
				c := a.connect()
				c.mustRequest("logging/setLevel", map[string]any{"level": "debug"})
				for i := range calls {
					o := callBurst(t, c, burstTool, n)
					require.True(t, o.complete, "%s, call %d: before its response the client got %q", mode, i, o.got)
				}
			})
		})
	}
}

// recordedUpstream is an mcp-go server over streamable HTTP whose tool burstTool
// sends, for call k of n notifications, log messages with data "k.i" and
// progress k*1000+i+1, alternating, and answers at once. Each response stream of
// a tools/call is recorded: what mcp-go itself put on the call's stream, in
// order, the response left out. mcp-go v1.2.1 hands a call's notifications to
// whichever stream of the session takes them first (the call's, or a standalone
// GET stream) and may drop the last one; the record says which it did.
type recordedUpstream struct {
	url   string
	calls chan []string // per tools/call, once its handler returned
	mu    sync.Mutex
	onGET []string // notifications written on GET streams, as noteTokens
}

// getNotes are the notifications mcp-go wrote on GET streams so far.
func (u *recordedUpstream) getNotes() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.onGET)
}

func startRecordedUpstream(t *testing.T) *recordedUpstream {
	t.Helper()
	up := server.NewMCPServer("burst", "1.0.0", server.WithToolCapabilities(false), server.WithLogging())
	up.AddTool(mcp.NewTool(burstTool, mcp.WithDescription("Sends notifications, then answers."), mcp.WithNumber("n"), mcp.WithNumber("k")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n, k := req.GetInt("n", 1), req.GetInt("k", 0)
			var token mcp.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			for i := range n {
				if err := up.SendNotificationToClient(ctx, "notifications/message", map[string]any{
					"level": "warning", "logger": "burst", "data": fmt.Sprintf("%d.%d", k, i),
				}); err != nil {
					return nil, err
				}
				if err := up.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
					"progressToken": token, "progress": k*1000 + i + 1,
				}); err != nil {
					return nil, err
				}
			}
			return mcp.NewToolResultText("done"), nil
		})
	u := &recordedUpstream{calls: make(chan []string, 1024)}
	mcpHandler := server.NewStreamableHTTPServer(up)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodGet {
			mcpHandler.ServeHTTP(&getWriter{ResponseWriter: w, u: u}, r)
			return
		}
		var m message
		if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil || m.Method != "tools/call" {
			mcpHandler.ServeHTTP(w, r)
			return
		}
		rec := &teeWriter{ResponseWriter: w}
		mcpHandler.ServeHTTP(rec, r)
		u.calls <- sseNotes(rec.copy())
	})
	u.url = serveHTTP(t, handler) + "/mcp"
	return u
}

// retokened gives the progress notifications the client's token "tok": the
// aggregator sends its upstreams a token of its own.
func retokened(notes []notification) []notification {
	for i, n := range notes {
		if n.Method != "notifications/progress" {
			continue
		}
		var p map[string]json.RawMessage
		if json.Unmarshal(n.Params, &p) == nil {
			p["progressToken"] = json.RawMessage(`"tok"`)
			notes[i].Params, _ = json.Marshal(p)
		}
	}
	return notes
}

// teeWriter keeps a copy of what a handler writes.
type teeWriter struct {
	http.ResponseWriter
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w *teeWriter) copy() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

// getWriter records the notifications mcp-go writes on a GET stream, which it
// writes an event at a time.
type getWriter struct {
	http.ResponseWriter
	u *recordedUpstream
}

func (w *getWriter) Write(p []byte) (int, error) {
	notes := sseNotes(p)
	w.u.mu.Lock()
	w.u.onGET = append(w.u.onGET, notes...)
	w.u.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *getWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// sseNotes are the notifications in an SSE stream, as noteTokens, with the
// client's progress token.
func sseNotes(stream []byte) []string {
	var notes []notification
	for _, line := range bytes.Split(stream, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: ")) // mcp-go writes every message on one data line
		var m message
		if ok && json.Unmarshal(data, &m) == nil && m.Method != "" && len(m.ID) == 0 {
			notes = append(notes, notification{Method: m.Method, Params: m.Params})
		}
	}
	return noteTokens(retokened(notes))
}

// inOrder reports whether want occurs in got in the same order, other tokens
// allowed in between.
func inOrder(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// progressValue is the progress of a noteTokens token of a progress
// notification ("P3002": 3002), false for any other.
func progressValue(note string) (int, bool) {
	v, err := strconv.Atoi(strings.TrimPrefix(note, "P"))
	return v, strings.HasPrefix(note, "P") && err == nil
}

// progressIncreases reports whether the progress notifications among notes
// increase, as MCP wants of a request's progress.
func progressIncreases(notes []string) bool {
	last, any := 0, false
	for _, n := range notes {
		if v, ok := progressValue(n); ok {
			if any && v <= last {
				return false
			}
			last, any = v, true
		}
	}
	return true
}

// unsuperseded is sent without the progress notifications that got lacks
// because got holds a higher one: mcp-go may write a call's later progress
// on its GET stream before the earlier one on the call's stream, and once
// the client has the later one, the earlier is out of date and dropped.
func unsuperseded(sent, got []string) []string {
	top := 0
	for _, g := range got {
		if v, ok := progressValue(g); ok && v > top {
			top = v
		}
	}
	var out []string
	for _, n := range sent {
		if v, ok := progressValue(n); ok && v < top && !slices.Contains(got, n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// TestCallNotificationsFromMCPGo: with mcp-go's own streamable-HTTP server as the
// upstream, whatever it puts on a call's response stream reaches the client in
// that order before the call's response, through the aggregator as directly,
// but for progress the client already has a later value of (it comes out of
// order over two streams); progress always increases; and
// every log message it sends reaches the client, on the call's stream or the
// session's. What it sends on its GET stream instead, or loses, is its own doing:
// the counts are logged for each way.
func TestCallNotificationsFromMCPGo(t *testing.T) {
	t.Parallel()
	const calls, n = 60, 3
	// session records what reaches the client outside its calls' streams: over
	// HTTP its GET stream, over stdio the connection (c's own inbox).
	check := func(t *testing.T, u *recordedUpstream, c *client, session *inbox) {
		c.mustRequest("logging/setLevel", map[string]any{"level": "debug"})
		var onStreams, inCalls []string
		whole, rescued := 0, 0
		for k := range calls {
			got := burstNotes(t, c, burstTool, map[string]any{"n": n, "k": k})
			var sent []string
			select {
			case sent = <-u.calls:
			case <-time.After(callTimeout):
				t.Fatalf("call %d: the upstream's handler never returned", k)
			}
			require.True(t, progressIncreases(got), "call %d: the client got progress that does not increase: %q", k, got)
			require.True(t, inOrder(unsuperseded(sent, got), got), "call %d: the upstream sent %q on its stream, the client got %q before the response", k, sent, got)
			onStreams, inCalls = append(onStreams, sent...), append(inCalls, got...)
			var want []string
			for i := range n {
				want = append(want, fmt.Sprintf(`L"%d.%d"`, k, i), fmt.Sprintf("P%d", k*1000+i+1))
			}
			if slices.Equal(got, want) {
				whole++
			}
			for _, g := range got {
				if slices.Contains(want, g) && !slices.Contains(sent, g) {
					rescued++ // it came on the GET stream, during the call
				}
			}
		}
		// Every log message mcp-go sent, on either stream, reaches the client.
		missing := func() []string {
			received := slices.Clone(inCalls)
			if session != nil {
				notes, _ := session.snapshot()
				received = append(received, noteTokens(notes)...)
			}
			var out []string
			for _, note := range append(slices.Clone(onStreams), u.getNotes()...) {
				if strings.HasPrefix(note, "L") && !slices.Contains(received, note) {
					out = append(out, note)
				}
			}
			return out
		}
		deadline := time.After(10 * time.Second)
		for {
			var changed <-chan struct{}
			if session != nil {
				_, changed = session.snapshot()
			}
			lost := missing()
			if len(lost) == 0 {
				break
			}
			select {
			case <-changed: // nil when there is no session stream: only the deadline
			case <-deadline:
				t.Fatalf("log messages the upstream sent never reached the client: %q", lost)
			}
		}
		onGET := u.getNotes()
		t.Logf("%s: of %d notifications, mcp-go put %d on the calls' streams and %d on GET streams; %d of the latter "+
			"reached their call before its response; %d of %d calls arrived whole and in order",
			t.Name(), calls*2*n, len(onStreams), len(onGET), rescued, whole, calls)
	}
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		u := startRecordedUpstream(t)
		box := newInbox()
		c := &client{t: t, wire: newHTTPWire(u.url, box), inbox: box}
		c.initialize()
		check(t, u, c, nil)
	})
	for _, shared := range []bool{true, false} {
		mode := map[bool]string{true: "shared", false: "leased"}[shared]
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			eachTransport(t, func(t *testing.T, tr transport) {
				u := startRecordedUpstream(t)
				a := serveConfig(t, tr, fmt.Sprintf("version: 1\nservers:\n  burst:\n    url: %s\n    truely-stateless: %t\n", quoted(u.url), shared))
				a.waitLoaded()
				c := a.connect()
				session := c.inbox
				if tr == httpTransport {
					session = newInbox()
					openGETStream(t, c.wire.(*httpWire), session)
				}
				check(t, u, c, session)
			})
		})
	}
}

// openGETStream opens the session's standalone GET stream and records what
// arrives on it in box until the test ends.
func openGETStream(t *testing.T, w *httpWire, box *inbox) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	w.mu.Lock()
	req.Header.Set("Mcp-Session-Id", w.session)
	req.Header.Set("MCP-Protocol-Version", w.protocol)
	w.mu.Unlock()
	resp, err := w.hc.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = readSSE(resp.Body, func(data []byte) bool { box.dispatch(data, nil); return true })
	}()
	t.Cleanup(func() { cancel(); <-done; resp.Body.Close() })
}
