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
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// surfaceRemote is a streamable-HTTP MCP server that sends what an upstream
// sends besides responses, on the response stream of a tools/call or on the
// GET stream:
//   - ask: sends sampling/createMessage on the call's stream, waits for
//     the client's answer and returns it raw as structuredContent.response;
//   - notify: sends a progress notification without _meta, then a log
//     message whose data spans several SSE data lines, then a notification
//     without "jsonrpc", then the result;
//   - hold: answers once release is closed;
//   - pretty: answers with a pretty-printed JSON body.
//
// Everything the client POSTs that is not a request goes to posted.
type surfaceRemote struct {
	mu      sync.Mutex
	answers map[string]chan *jsonrpc.Message // the client's answers, by id key
	asked   atomic.Int64
	posted  chan *jsonrpc.Message
	get     chan string   // data of events for the GET stream
	holding chan struct{} // a hold call arrived
	release chan struct{}
}

func newSurfaceRemote(t *testing.T) (*surfaceRemote, string) {
	f := &surfaceRemote{answers: map[string]chan *jsonrpc.Message{}, posted: make(chan *jsonrpc.Message, 64),
		get: make(chan string, 8), holding: make(chan struct{}, 8), release: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *surfaceRemote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case data := <-f.get:
				_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case http.MethodDelete:
		return
	}
	msg, ok := decodePost(w, r)
	if !ok {
		return
	}
	if !msg.IsRequest() {
		f.posted <- msg
		if msg.IsResponse() {
			f.mu.Lock()
			ch := f.answers[jsonrpc.IDKey(msg.ID)]
			f.mu.Unlock()
			if ch != nil {
				ch <- msg
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch msg.Method {
	case "initialize":
		writeJSON(w, msg.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"fake","version":"1"}}`)
	case "tools/list":
		writeJSON(w, msg.ID, `{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		f.call(w, r, msg)
	default:
		writeJSON(w, msg.ID, `{}`)
	}
}

func (f *surfaceRemote) call(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	var p struct {
		Name string `json:"name"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	if p.Name == "pretty" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": %s,\n  \"result\": {\n    \"big\": %s,\n    \"f\": 1.50\n  }\n}\n", msg.ID, big)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(data string) {
		_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
	result := func(structured string) {
		send(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"content":[],"structuredContent":` + structured + `}}`)
	}
	switch p.Name {
	case "ask":
		id := fmt.Sprintf(`"srv-%d"`, f.asked.Add(1))
		answer := make(chan *jsonrpc.Message, 1)
		f.mu.Lock()
		f.answers[jsonrpc.IDKey(json.RawMessage(id))] = answer
		f.mu.Unlock()
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":` + big + `}}`)
		select {
		case resp := <-answer:
			result(`{"response":` + string(resp.Encode()) + `}`)
		case <-r.Context().Done():
		}
	case "notify":
		send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(p.Meta.ProgressToken) + `,"progress":1,"x":` + big + `}}`)
		_, _ = fmt.Fprintf(w, "id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\ndata:  \"method\":\"notifications/message\",\ndata: \"params\":{\"level\":\"info\",\"data\":{\"big\":%s, \"f\":1.50}}}\n\n", big)
		w.(http.Flusher).Flush()
		// Not JSON-RPC 2.0 (no "jsonrpc"), but taken as a notification.
		send(`{"method":"notifications/loose","params":{"a":1}}`)
		result(`{}`)
	case "hold":
		f.holding <- struct{}{}
		select {
		case <-f.release:
			result(`{}`)
		case <-r.Context().Done():
		}
	}
}

// waitPosted returns the next message the client POSTed with method (""
// for an answer), skipping others.
func (f *surfaceRemote) waitPosted(t *testing.T, method string) *jsonrpc.Message {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case m := <-f.posted:
			if m.Method == method {
				return m
			}
		case <-deadline:
			t.Fatalf("the client posted no %q within %s", method, waitTimeout)
		}
	}
}

func TestRemoteServerRequestGoesToTheRequestOnWhoseStreamItCame(t *testing.T) {
	t.Parallel()
	f, url := newSurfaceRemote(t)
	inst := startRemote(t, config.TransportHTTP, url, Options{})
	ctx := testContext(t)

	// Two asks in flight at once: each handler waits until both have been
	// given a request, so neither answers unless each got its own.
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	handler := func(who int) ServerRequestHandler {
		return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			assert.Equal(t, "sampling/createMessage", method)
			assert.Equal(t, `{"messages":[],"maxTokens":`+big+`}`, string(params), "the request arrives raw")
			arrived.Done()
			select {
			case <-both:
			case <-ctx.Done():
			}
			return json.RawMessage(fmt.Sprintf(`{"who":%d,"n":%s}`, who, big)), nil
		}
	}
	results := make([]json.RawMessage, 2)
	var wg sync.WaitGroup
	for who := range 2 {
		wg.Go(func() {
			raw, err := inst.Do(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ask"}`), OnServerRequest: handler(who)})
			assert.NoError(t, err)
			results[who] = raw
		})
	}
	wg.Wait()
	for who, raw := range results {
		var res struct {
			Structured struct {
				Response struct {
					Result json.RawMessage `json:"result"`
				} `json:"response"`
			} `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
		assert.Equal(t, fmt.Sprintf(`{"who":%d,"n":%s}`, who, big), string(res.Structured.Response.Result), "the answer reaches the upstream unchanged")
	}
	var ids, answers []string
	for range 2 {
		m := f.waitPosted(t, "")
		ids, answers = append(ids, string(m.ID)), append(answers, string(m.Result))
	}
	assert.ElementsMatch(t, []string{`"srv-1"`, `"srv-2"`}, ids)
	assert.ElementsMatch(t, []string{`{"who":0,"n":` + big + `}`, `{"who":1,"n":` + big + `}`}, answers, "posted as the handlers gave them")
}

func TestRemoteServerRequestOnTheGETStream(t *testing.T) {
	t.Parallel()
	f, url := newSurfaceRemote(t)
	inst := startRemote(t, config.TransportHTTP, url, Options{})
	ctx := testContext(t)
	request := func(id string) { f.get <- `{"jsonrpc":"2.0","id":"` + id + `","method":"roots/list"}` }

	// No request in flight, no handler: an error at once.
	request("g1")
	answer := f.waitPosted(t, "")
	assert.Equal(t, `"g1"`, string(answer.ID))
	require.NotNil(t, answer.Error)
	assert.Equal(t, CodeUnattributed, answer.Error.Code)
	assert.Contains(t, answer.Error.Message, "roots/list cannot be attributed")

	// The instance's handler.
	session := newServerRequests()
	inst.SetServerRequestHandler(session.handle)
	request("g2")
	answer = f.waitPosted(t, "")
	assert.Equal(t, `{"jsonrpc":"2.0","id":"g2","result":`+answerResult+`}`, string(answer.Encode()))

	// The only request in flight with a handler.
	h := newServerRequests()
	held := make(chan error, 1)
	go func() {
		_, err := inst.Do(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"hold"}`), OnServerRequest: h.handle})
		held <- err
	}()
	<-f.holding
	request("g3")
	answer = f.waitPosted(t, "")
	assert.Equal(t, `"g3"`, string(answer.ID))
	assert.Equal(t, []string{"roots/list "}, h.all())
	assert.Len(t, session.all(), 1)
	close(f.release)
	require.NoError(t, <-held)
}

func TestRemoteNotificationsArriveRaw(t *testing.T) {
	t.Parallel()
	f, url := newSurfaceRemote(t)
	log := newNotificationLog()
	inst := startRemote(t, config.TransportHTTP, url, Options{OnNotification: log.add})
	ctx := testContext(t)

	assert.True(t, inst.Capabilities().Logging)
	initialized := f.waitPosted(t, "notifications/initialized")
	assert.Nil(t, initialized.Params)

	progress := newProgressLog()
	_, err := inst.Do(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"notify"}`),
		ProgressToken: json.RawMessage(`"mine"`), OnProgress: progress.add})
	require.NoError(t, err)
	require.Len(t, progress.all(), 1)
	assert.Equal(t, `{"progressToken":"mine","progress":1,"x":`+big+`}`, string(progress.all()[0]), "no _meta added, no number rounded")
	got := log.waitLen(t, 2)
	assert.Equal(t, Notification{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":{"big":` + big + `,"f":1.50}}`)}, got[0],
		"several data lines make one message, every token kept")
	assert.Equal(t, Notification{Method: "notifications/loose", Params: json.RawMessage(`{"a":1}`)}, got[1],
		"a message without \"jsonrpc\" is taken leniently, and gains no member")

	// A notification from the aggregator goes out as it is.
	require.NoError(t, inst.Notify(ctx, "notifications/roots/list_changed", nil))
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, string(f.waitPosted(t, "notifications/roots/list_changed").Encode()))
	require.NoError(t, inst.Notify(ctx, "notifications/x", json.RawMessage(`{"n":`+big+`}`)))
	assert.Equal(t, `{"n":`+big+`}`, string(f.waitPosted(t, "notifications/x").Params))

	// A pretty-printed result loses its line breaks, nothing else.
	raw, err := inst.CallTool(ctx, Call{Name: "pretty"})
	require.NoError(t, err)
	assert.Equal(t, `{"big":`+big+`,"f":1.50}`, string(raw))
}

// surfaceSSE is a legacy HTTP+SSE server whose ask tool sends the client a
// request on the one stream, with the very id of the call it belongs to, and
// answers the call with the client's answer.
type surfaceSSE struct {
	out  chan string
	call atomic.Pointer[json.RawMessage] // the id of the ask call waiting
}

func (f *surfaceSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		serveLegacyStream(w, r, f.out, nil)
		return
	}
	msg, ok := decodePost(w, r)
	if !ok {
		return
	}
	w.WriteHeader(http.StatusAccepted)
	respond := func(id json.RawMessage, result string) {
		f.out <- string((&jsonrpc.Message{ID: id, Result: json.RawMessage(result)}).Encode())
	}
	switch {
	case msg.IsResponse():
		if id := f.call.Load(); id != nil {
			respond(*id, `{"content":[],"structuredContent":{"response":`+string(msg.Encode())+`}}`)
		}
	case msg.Method == "initialize":
		respond(msg.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
	case msg.Method == "tools/list":
		respond(msg.ID, `{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`)
	case msg.Method == "tools/call":
		id := msg.ID
		f.call.Store(&id)
		f.out <- `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":` + big + `}}`
		f.out <- `{"jsonrpc":"2.0","id":` + string(id) + `,"method":"elicitation/create","params":{"mode":"form","message":"?"}}`
	}
}

func TestRemoteSSEServerRequest(t *testing.T) {
	t.Parallel()
	f := &surfaceSSE{out: make(chan string, 16)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	log := newNotificationLog()
	inst := startRemote(t, config.TransportSSE, srv.URL+"/sse", Options{OnNotification: log.add})
	h := newServerRequests()
	raw, err := inst.Do(testContext(t), Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ask"}`), OnServerRequest: h.handle})
	require.NoError(t, err)
	assert.Equal(t, []string{`elicitation/create {"mode":"form","message":"?"}`}, h.all(),
		"a request with the id of a pending call is a request, not that call's response")
	assert.True(t, strings.Contains(string(raw), `"result":`+answerResult), "%s", raw)
	assert.Equal(t, Notification{Method: "notifications/message", Params: json.RawMessage(`{"level":"debug","data":` + big + `}`)}, log.waitLen(t, 1)[0])
}
