package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// serverRequests records the upstream requests a handler was given.
type serverRequests struct {
	mu    sync.Mutex
	calls []string // "method params"
	got   chan struct{}
	// answer answers each request; nil answers with answerResult.
	answer func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
}

const answerResult = `{"role":"assistant","content":{"type":"text","text":"hi <&>"},"model":"m","stopReason":"endTurn","x":` + big + `}`

func newServerRequests() *serverRequests { return &serverRequests{got: make(chan struct{}, 64)} }

func (s *serverRequests) handle(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	s.mu.Lock()
	s.calls = append(s.calls, method+" "+string(params))
	s.mu.Unlock()
	s.got <- struct{}{}
	if s.answer != nil {
		return s.answer(ctx, method, params)
	}
	return json.RawMessage(answerResult), nil
}

func (s *serverRequests) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// waitCall waits until the handler has been given a request.
func (s *serverRequests) waitCall(t *testing.T) {
	t.Helper()
	select {
	case <-s.got:
	case <-time.After(waitTimeout):
		t.Fatal("the handler was given no request")
	}
}

// askResponse is what the surface server's ask tool got back.
func askResponse(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var res struct {
		Structured struct {
			Response json.RawMessage `json:"response"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	return string(res.Structured.Response)
}

// startHeldAsk runs run, an ask whose server request goes to first, in the
// background: first holds the request until hold is closed, then answers
// {"first":true}; done has the ask's result.
func startHeldAsk(run func(h ServerRequestHandler) (json.RawMessage, error)) (first *serverRequests, hold chan struct{}, done <-chan callResult) {
	first, hold = newServerRequests(), make(chan struct{})
	first.answer = func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		<-hold
		return json.RawMessage(`{"first":true}`), nil
	}
	result := make(chan callResult, 1)
	go func() {
		raw, err := run(first.handle)
		result <- callResult{raw, err}
	}()
	return first, hold, result
}

// ask calls the surface server's ask tool through Do.
func ask(ctx context.Context, inst *Instance, args string, h ServerRequestHandler) (json.RawMessage, error) {
	return inst.Do(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ask","arguments":` + args + `}`), OnServerRequest: h})
}

func TestServerRequestAttributionOverStdio(t *testing.T) {
	t.Parallel()

	t.Run("the only request in flight with a handler answers", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface", Options{})
		ctx := testContext(t)
		h := newServerRequests()
		raw, err := ask(ctx, inst, `{}`, h.handle)
		require.NoError(t, err)
		assert.Equal(t, `{"result":`+answerResult+`}`, askResponse(t, raw), "the answer reaches the upstream unchanged")
		assert.Equal(t, []string{`sampling/createMessage {"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}],"maxTokens":` + big + `}`},
			h.all(), "the request reaches the handler unchanged")

		// Elicitation and roots go the same way, and an error comes back intact.
		h.answer = func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			return nil, &jsonrpc.Error{Code: -32042, Message: "declined", Data: json.RawMessage(`{"big":` + big + `}`)}
		}
		for _, method := range []string{"elicitation/create", "roots/list"} {
			raw, err = ask(ctx, inst, `{"method":"`+method+`","params":{"mode":"url","url":"https://example.com/x"}}`, h.handle)
			require.NoError(t, err)
			assert.Equal(t, `{"error":{"code":-32042,"message":"declined","data":{"big":`+big+`}}}`, askResponse(t, raw))
		}
		assert.Len(t, h.all(), 3)

		// CallTool carries a handler as Do does.
		h.answer = nil
		raw, err = inst.CallTool(ctx, Call{Name: "ask", Arguments: json.RawMessage(`{"method":"roots/list","params":{}}`), OnServerRequest: h.handle})
		require.NoError(t, err)
		assert.Equal(t, `{"result":`+answerResult+`}`, askResponse(t, raw))
		assert.Equal(t, "roots/list {}", h.all()[3])
	})

	t.Run("the instance's handler answers what no request claims", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface", Options{})
		ctx := testContext(t)
		session := newServerRequests()
		inst.SetServerRequestHandler(session.handle)
		raw, err := ask(ctx, inst, `{"method":"roots/list","params":{}}`, nil)
		require.NoError(t, err)
		assert.Equal(t, `{"result":`+answerResult+`}`, askResponse(t, raw))
		assert.Equal(t, []string{"roots/list {}"}, session.all())
	})

	t.Run("ping is answered by the aggregator", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface", Options{})
		h := newServerRequests()
		raw, err := ask(testContext(t), inst, `{"method":"ping"}`, h.handle)
		require.NoError(t, err)
		assert.Equal(t, `{"result":{}}`, askResponse(t, raw))
		assert.Empty(t, h.all())
	})

	t.Run("with no one to answer, the upstream gets an error at once", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface", Options{})
		raw, err := ask(testContext(t), inst, `{}`, nil)
		require.NoError(t, err)
		var resp struct {
			Error jsonrpc.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(askResponse(t, raw)), &resp))
		assert.Equal(t, -32603, resp.Error.Code)
		assert.Contains(t, resp.Error.Message, "sampling/createMessage")
		assert.Contains(t, resp.Error.Message, "cannot be attributed to one downstream session")
	})

	// Two requests in flight with handlers: over stdio nothing tells whose
	// an upstream request is, so neither handler gets it.
	for _, withSession := range []bool{false, true} {
		name := "two requests in flight: an error"
		if withSession {
			name = "two requests in flight: the instance's handler"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inst := startDemo(t, "surface", Options{})
			ctx := testContext(t)
			session := newServerRequests()
			if withSession {
				inst.SetServerRequestHandler(session.handle)
			}
			// The first ask's request reaches its handler (it is alone),
			// which holds it: the first ask stays in flight.
			first, hold, firstDone := startHeldAsk(func(h ServerRequestHandler) (json.RawMessage, error) {
				return ask(ctx, inst, `{}`, h)
			})
			first.waitCall(t)

			second := newServerRequests()
			raw, err := ask(ctx, inst, `{"method":"elicitation/create","params":{"message":"?"}}`, second.handle)
			require.NoError(t, err)
			assert.Empty(t, second.all(), "not attributed to the second request")
			assert.Len(t, first.all(), 1, "nor to the first")
			if withSession {
				assert.Equal(t, `{"result":`+answerResult+`}`, askResponse(t, raw))
				assert.Equal(t, []string{`elicitation/create {"message":"?"}`}, session.all())
			} else {
				assert.Contains(t, askResponse(t, raw), "elicitation/create cannot be attributed")
			}

			close(hold)
			res := <-firstDone
			require.NoError(t, res.err)
			assert.Equal(t, `{"result":{"first":true}}`, askResponse(t, res.raw))
		})
	}
}

func TestServerRequestContext(t *testing.T) {
	t.Parallel()

	t.Run("ends with the request it belongs to", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface", Options{})
		h := newServerRequests()
		ended := make(chan struct{})
		h.answer = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			<-ctx.Done()
			close(ended)
			return nil, jsonrpc.Errorf(-32603, "gone")
		}
		ctx, cancel := context.WithCancel(testContext(t))
		done := make(chan error, 1)
		go func() {
			_, err := ask(ctx, inst, `{}`, h.handle)
			done <- err
		}()
		h.waitCall(t)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		select {
		case <-ended:
		case <-time.After(waitTimeout):
			t.Fatal("the handler's context outlived the request")
		}
	})

	t.Run("ends when the upstream withdraws the request", func(t *testing.T) {
		t.Parallel()
		inst := startDemo(t, "surface", Options{})
		ctx := testContext(t)
		session := newServerRequests()
		ended := make(chan struct{})
		session.answer = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			<-ctx.Done()
			close(ended)
			return json.RawMessage(`{"too":"late"}`), nil
		}
		inst.SetServerRequestHandler(session.handle)
		askCtx, cancelAsk := context.WithCancel(ctx)
		defer cancelAsk()
		asked := make(chan error, 1)
		go func() {
			_, err := ask(askCtx, inst, `{}`, nil)
			asked <- err
		}()
		session.waitCall(t)
		// The surface server numbers its requests: this is its first.
		_, err := inst.CallTool(ctx, Call{Name: "notify", Arguments: json.RawMessage(`{"notifications":[{"method":"notifications/cancelled","params":{"requestId":"ask-1","reason":"no longer needed"}}]}`)})
		require.NoError(t, err)
		select {
		case <-ended:
		case <-time.After(waitTimeout):
			t.Fatal("the handler's context outlived the upstream's cancellation")
		}
		// No answer goes back: the ask tool keeps waiting for one.
		select {
		case err := <-asked:
			t.Fatalf("the withdrawn request was answered: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		cancelAsk()
		require.ErrorIs(t, <-asked, context.Canceled)
	})
}

// The bound on concurrent upstream requests holds for requests that are
// handed to a handler, too.
func TestServerRequestsAreBounded(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "surface", Options{})
	ctx := testContext(t)
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, peak := 0, 0
	session := newServerRequests()
	session.answer = func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return json.RawMessage(`{}`), nil
	}
	inst.SetServerRequestHandler(session.handle)
	const asks = maxServerRequests + 4
	results := make(chan callResult, asks)
	for range asks {
		go func() {
			raw, err := ask(ctx, inst, `{}`, nil)
			results <- callResult{raw, err}
		}()
	}
	for range maxServerRequests {
		session.waitCall(t)
	}
	// The ones beyond the bound are refused at once.
	refused := 0
	for range asks - maxServerRequests {
		res := <-results
		require.NoError(t, res.err)
		assert.Contains(t, askResponse(t, res.raw), "too many concurrent requests")
		refused++
	}
	// Every handler inside the bound has counted itself in before any leaves.
	for deadline := time.Now().Add(waitTimeout); ; {
		mu.Lock()
		n := inFlight
		mu.Unlock()
		if n == maxServerRequests || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range maxServerRequests {
		res := <-results
		require.NoError(t, res.err)
		assert.Equal(t, `{"result":{}}`, askResponse(t, res.raw))
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, maxServerRequests, peak)
	assert.Equal(t, asks-maxServerRequests, refused)
	assert.True(t, strings.HasPrefix(session.all()[0], "sampling/createMessage"))
}

// askAs calls the surface server's ask tool through Do for principal.
func askAs(ctx context.Context, inst *Instance, args string, h ServerRequestHandler, principal string) (json.RawMessage, error) {
	var who identity.Principal // "": no one's
	if principal != "" {
		who = identity.Client(principal)
	}
	return inst.Do(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ask","arguments":` + args + `}`), OnServerRequest: h, Principal: who})
}

// TestServerRequestAttributionByPrincipal: over stdio, with two requests in
// flight, an upstream request goes to the one of them not already waiting
// for an answer of its own, when both are of one principal; never to a
// request of another principal.
func TestServerRequestAttributionByPrincipal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		second   string // the second request's principal; the first's is "alice"
		toSecond bool
	}{
		{name: "one principal: the request not waiting answers", second: "alice", toSecond: true},
		{name: "two principals: neither", second: "bob"},
		{name: "no principal is no one's", second: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst := startDemo(t, "surface", Options{})
			ctx := testContext(t)
			// The first ask's request reaches its handler (it is alone),
			// which holds it: the first ask stays in flight, waiting.
			first, hold, firstDone := startHeldAsk(func(h ServerRequestHandler) (json.RawMessage, error) {
				return askAs(ctx, inst, `{}`, h, "alice")
			})
			first.waitCall(t)

			second := newServerRequests()
			raw, err := askAs(ctx, inst, `{"method":"elicitation/create","params":{"message":"?"}}`, second.handle, tc.second)
			require.NoError(t, err)
			assert.Len(t, first.all(), 1, "not attributed to the request already waiting")
			if tc.toSecond {
				assert.Equal(t, `{"result":`+answerResult+`}`, askResponse(t, raw))
				assert.Equal(t, []string{`elicitation/create {"message":"?"}`}, second.all())
			} else {
				assert.Empty(t, second.all(), "not attributed across principals")
				assert.Contains(t, askResponse(t, raw), "elicitation/create cannot be attributed")
				assert.Contains(t, askResponse(t, raw), "2 requests of 2 clients")
				assert.Contains(t, askResponse(t, raw), "lease the server (truely-stateless: false")
			}
			close(hold)
			res := <-firstDone
			require.NoError(t, res.err)
			assert.Equal(t, `{"result":{"first":true}}`, askResponse(t, res.raw))
		})
	}
}
