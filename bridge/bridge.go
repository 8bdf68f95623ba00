package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/requeststate"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The bridge serves protocol 2026-07-28 clients whose request reaches an
// upstream of an older generation that asks for input in the middle of it
// (elicitation/create, sampling/createMessage, roots/list). Such a client
// takes no server-to-client requests: it takes an input_required result and
// retries its request with inputResponses and the requestState it was
// given. So the bridge runs the request on its own, holds it open while the
// upstream waits, answers the client with input_required carrying the
// upstream's requests, and when the retry comes, hands the answers to the
// upstream and goes on waiting for its result, or its next request.
//
// A held request is an exchange. Its requestState names the exchange and
// round, is bound to the caller and to the request (method and params), is
// authenticated (requeststate), expires, and is good once. An exchange whose
// retry does not come within the hold is cancelled, and so is the upstream
// request; the call's own timeout (request_timeout, a tool's timeout) keeps
// running while it is held and ends it sooner when it is shorter; a run that
// ends so, between two rounds, stays held for the rest of the hold, and the
// retry that comes meanwhile gets its response.

// Bounds of the bridge.
const (
	// maxHeldPerCaller and maxHeldTotal bound the exchanges awaiting a
	// client's retry, per caller (lease key) and in all.
	maxHeldPerCaller = 16
	maxHeldTotal     = 1024
	// maxBridgeRounds bounds the input_required rounds of one exchange.
	maxBridgeRounds = 32
	// maxOpenInputs bounds the upstream requests of one exchange that await
	// the client's answers at once.
	maxOpenInputs = 16
)

// errTooManyInputs fails an upstream request beyond maxOpenInputs.
var errTooManyInputs = errors.New("too many requests of the upstream await the client's answers in this call")

// Config is what the bridge asks of the server it serves for.
type Config struct {
	// Hold is how long an exchange waits for its client's retry.
	Hold time.Duration
	// CallerOf is the identity a requestState is bound to.
	CallerOf func(req *downstream.Request) string
	// Undeclared is the refusal of an upstream request (method, params)
	// that the client request waiting now (waiter) did not declare the
	// capability for; nil when it did.
	Undeclared func(waiter *downstream.Request, method string, params json.RawMessage) *jsonrpc.Error
	// WantsLog reports whether the client request waiting takes a log
	// message with params.
	WantsLog func(waiter *downstream.Request, params json.RawMessage) bool
	// Caller is what the upstream requests of a held request's run see of
	// it (its log level, where its log messages go).
	Caller func(held *downstream.Request, level string) upstream.Caller
}

// Bridge is the table of held exchanges. Init makes it ready.
type Bridge struct {
	cfg       Config
	codec     *requeststate.Codec // nil: no key could be made; the bridge refuses
	hold      time.Duration
	mu        sync.Mutex
	held      map[requeststate.Nonce]*exchange
	perCaller map[string]int
	closed    bool // the aggregator stops: nothing more is held
}

// errBridgeClosed refuses to hold a request while the aggregator stops.
var errBridgeClosed = errors.New("the aggregator is stopping: a request that awaits input cannot be held for a retry; send it again once the aggregator is back")

// Init makes the bridge ready to hold requests as cfg says.
func (b *Bridge) Init(cfg Config) error {
	b.cfg = cfg
	b.hold = cfg.Hold
	b.held = map[requeststate.Nonce]*exchange{}
	b.perCaller = map[string]int{}
	codec, err := requeststate.New()
	if err != nil {
		return err
	}
	b.codec = codec
	return nil
}

// exchange is one request held open across a client's rounds.
type exchange struct {
	cfg     *Config // the bridge's
	id      requeststate.Nonce
	caller  string
	callerD requeststate.Digest
	request requeststate.Digest
	cancel  context.CancelFunc    // ends the run, and so the upstream request
	final   chan *jsonrpc.Message // the run's response; buffered for it
	wake    chan struct{}         // an upstream request was queued; buffered 1

	mu         sync.Mutex
	registered bool // in the bridge's table
	round      uint32
	nonce      requeststate.Nonce // of the live requestState; zero once used
	seq        int
	queued     []*inputAsk // not yet shown to the client
	open       []*inputAsk // shown, awaiting the client's answers
	waiter     *downstream.Request
	token      json.RawMessage // the waiter's progress token
	timer      *time.Timer     // the hold: cancels the exchange when no retry comes
}

// inputAsk is one upstream request awaiting the client's answer.
type inputAsk struct {
	key    string
	method string
	params json.RawMessage
	answer chan *jsonrpc.Message // buffered for the one answer: the client's result, or a refusal
}

// Bridgeable reports whether a request is served through the bridge: the
// requests protocol 2026-07-28 allows input_required on, from a client of
// that generation.
func Bridgeable(req *downstream.Request) bool {
	if !protocol.Modern(req.Protocol) {
		return false
	}
	switch req.Msg.Method {
	case "tools/call", "prompts/get", "resources/read":
		return true
	}
	return false
}

// Serve serves req with serve, through the bridge when the request is
// bridgeable: a retry carrying a requestState of the aggregator's continues
// its exchange; any other request starts one (a requestState that is not
// the aggregator's belongs to an upstream of the same generation and goes
// to it with the request).
func (b *Bridge) Serve(ctx context.Context, req *downstream.Request, serve func(context.Context, *downstream.Request) *jsonrpc.Message) *jsonrpc.Message {
	if !Bridgeable(req) {
		return serve(ctx, req)
	}
	if state, ok := rawjson.String(rawjson.Member(req.Msg.Params, "requestState")); ok && len(state) >= len(requeststate.Prefix) &&
		state[:len(requeststate.Prefix)] == requeststate.Prefix {
		return b.resume(ctx, req, state)
	}
	if b.codec == nil {
		return serve(ctx, req)
	}
	caller := b.cfg.CallerOf(req)
	digest, err := requeststate.RequestDigest(req.Msg.Method, req.Msg.Params)
	if err != nil {
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", req.Msg.Method, err))
	}
	x := &exchange{cfg: &b.cfg, id: requeststate.NewNonce(), caller: caller, callerD: requeststate.CallerDigest(caller), request: digest,
		final: make(chan *jsonrpc.Message, 1), wake: make(chan struct{}, 1)}
	// The run outlives this request when the upstream asks for input: it
	// keeps ctx's values, not its end. Ending it is the exchange's to do.
	runCtx, cancelRun := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func() { cancelRun(nil) }
	x.cancel = cancel
	held := *req
	held.Ask = x.ask
	held.Send = x.send
	held.Cancel = cancelRun // the run's to end, not the first request's
	// The run's log messages go to the client request waiting at the time;
	// it asks for them at the first request's level.
	level := ""
	if c := upstream.CallerOf(ctx); c != nil {
		level = c.LogLevel()
	}
	runCtx = upstream.WithCaller(runCtx, b.cfg.Caller(&held, level))
	x.attach(req) // before the run starts: its first progress finds req
	go func() {
		resp := serve(runCtx, &held)
		cancel()
		x.final <- resp
		// Nobody may wait for it (the run ended between two rounds: the
		// call's timeout, a question of the aggregator's own that timed
		// out): the exchange stays held until its hold ends, and the retry
		// that comes meanwhile gets the response.
	}()
	return b.await(ctx, req, x)
}

// await waits, for the client request req, for the exchange's response or
// for upstream requests to show the client.
func (b *Bridge) await(ctx context.Context, req *downstream.Request, x *exchange) *jsonrpc.Message {
	x.attach(req)
	for {
		select {
		case resp := <-x.final:
			return b.ended(x, resp)
		default:
		}
		if resp, ok := b.round(x); ok {
			return resp
		}
		select {
		case resp := <-x.final:
			return b.ended(x, resp)
		case <-x.wake:
		case <-ctx.Done():
			// The client gave up on the request: so does the aggregator,
			// upstream too.
			x.cancel()
			b.remove(x)
			return nil
		}
	}
}

// ended is the response to the client request waiting when the run ended.
// A run the bridge cancelled (its hold ran out as the retry arrived) has no
// response of its own; the client still gets one.
func (b *Bridge) ended(x *exchange, resp *jsonrpc.Message) *jsonrpc.Message {
	b.remove(x)
	if resp == nil {
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the request was released before it completed: no retry came within %s; send it again", b.hold))
	}
	return resp
}

// round answers the waiting client with input_required when upstream
// requests await its answers, and starts the hold; ok is false when there
// are none.
func (b *Bridge) round(x *exchange) (*jsonrpc.Message, bool) {
	x.mu.Lock()
	for _, a := range x.queued {
		// Capabilities are the request's own in this generation: the
		// client waiting now is asked only for what it declares now.
		if refusal := x.undeclared(a); refusal != nil {
			a.answer <- &jsonrpc.Message{Error: refusal}
			continue
		}
		x.seq++
		a.key = "input-" + strconv.Itoa(x.seq)
		x.open = append(x.open, a)
	}
	x.queued = nil
	if len(x.open) == 0 {
		x.mu.Unlock()
		return nil, false
	}
	if b.stopping() {
		// Checked with x.mu held until the hold starts: close either
		// sees this exchange held, or it is refused here.
		x.mu.Unlock()
		x.cancel()
		b.remove(x)
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", errBridgeClosed)), true
	}
	if !x.registered {
		if err := b.register(x); err != nil {
			x.mu.Unlock()
			x.cancel()
			return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", err)), true
		}
		x.registered = true
	}
	x.round++
	if x.round > maxBridgeRounds {
		x.mu.Unlock()
		x.cancel()
		b.remove(x)
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream asked for input more than %d times in one request; the request was cancelled", maxBridgeRounds)), true
	}
	x.nonce = requeststate.NewNonce()
	state := b.codec.Seal(requeststate.Claims{Exchange: x.id, Round: x.round, Nonce: x.nonce,
		Caller: x.callerD, Request: x.request, Expires: time.Now().Add(b.hold)})
	body := inputRequired(x.open, state)
	x.waiter, x.token = nil, nil
	x.timer = time.AfterFunc(b.hold, func() {
		// Out of the table before the run ends: once the run sees its
		// cancellation, nothing of it is left held.
		b.remove(x)
		x.cancel()
	})
	x.mu.Unlock()
	return &jsonrpc.Message{Result: body}, true
}

// undeclared is the refusal of the upstream request a that the client
// request waiting now did not declare the capability for (nil when it
// did, or when none waits).
func (x *exchange) undeclared(a *inputAsk) *jsonrpc.Error {
	if x.waiter == nil {
		return nil
	}
	return x.cfg.Undeclared(x.waiter, a.method, a.params)
}

// inputRequired renders the result that hands the client the upstream's
// requests, their params byte for byte.
func inputRequired(asks []*inputAsk, state string) json.RawMessage {
	out := []byte(`{"resultType":"input_required","inputRequests":{`)
	for i, a := range asks {
		if i > 0 {
			out = append(out, ',')
		}
		out = rawjson.AppendString(out, a.key)
		out = append(out, `:{"method":`...)
		out = rawjson.AppendString(out, a.method)
		if len(a.params) > 0 && string(a.params) != "null" {
			out = append(out, `,"params":`...)
			out = append(out, a.params...)
		}
		out = append(out, '}')
	}
	out = append(out, `},"requestState":`...)
	out = rawjson.AppendString(out, state)
	return append(out, '}')
}

// register enters x in the table, within the bounds. Called with x.mu held.
func (b *Bridge) register(x *exchange) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case len(b.held) >= maxHeldTotal:
		return fmt.Errorf("the aggregator already holds %d requests awaiting their clients' input; retry later", maxHeldTotal)
	case b.perCaller[x.caller] >= maxHeldPerCaller:
		return fmt.Errorf("this client already has %d requests awaiting its input; answer (retry) or abandon them first", maxHeldPerCaller)
	}
	b.held[x.id] = x
	b.perCaller[x.caller]++
	return nil
}

// remove takes x out of the table, if it is there, and stops its hold.
func (b *Bridge) remove(x *exchange) {
	x.mu.Lock()
	if x.timer != nil {
		x.timer.Stop()
	}
	x.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[x.id] != x {
		return
	}
	delete(b.held, x.id)
	if b.perCaller[x.caller]--; b.perCaller[x.caller] <= 0 {
		delete(b.perCaller, x.caller)
	}
}

// Close ends every held exchange, and its upstream request, that no
// client request waits on, and every one that would be held from now on:
// once the aggregator stops, no retry can reach them (a requestState is
// good with this process only), and its shutdown must not wait for them.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	held := make([]*exchange, 0, len(b.held))
	for _, x := range b.held {
		held = append(held, x)
	}
	b.mu.Unlock()
	for _, x := range held {
		x.mu.Lock()
		idle := x.waiter == nil
		x.mu.Unlock()
		if idle {
			x.cancel()
			b.remove(x)
		}
	}
}

// Held is how many exchanges await their client's retry.
func (b *Bridge) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// stopping reports whether Close was called.
func (b *Bridge) stopping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// refused answers a retry whose requestState the bridge does not accept.
func refused(reason string) *jsonrpc.Message {
	return &jsonrpc.Message{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: "requestState refused: " + reason + "; send the request again without inputResponses and requestState to start over",
		Data:    json.RawMessage(`{"reason":"invalid_request_state"}`)}}
}

// resume continues an exchange with a client's retry.
func (b *Bridge) resume(ctx context.Context, req *downstream.Request, state string) *jsonrpc.Message {
	if b.codec == nil {
		return refused("the aggregator issued no requestState")
	}
	claims, err := b.codec.Open(state)
	if err != nil {
		return refused(err.Error())
	}
	digest, err := requeststate.RequestDigest(req.Msg.Method, req.Msg.Params)
	if err != nil {
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", req.Msg.Method, err))
	}
	switch {
	case !requeststate.Equal(claims.Caller, requeststate.CallerDigest(b.cfg.CallerOf(req))):
		return refused("it was issued to another caller")
	case !requeststate.Equal(claims.Request, digest):
		return refused("it was issued for another request; a retry repeats the method and params of the request it continues")
	}
	answers, bad := inputResponses(req.Msg.Params)
	if bad != "" {
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %s", req.Msg.Method, bad))
	}
	b.mu.Lock()
	x := b.held[claims.Exchange]
	b.mu.Unlock()
	if x == nil {
		return refused("the request it continues is no longer held (it ended, timed out, or was answered)")
	}
	x.mu.Lock()
	if x.nonce == (requeststate.Nonce{}) || x.nonce != claims.Nonce || x.round != claims.Round {
		x.mu.Unlock()
		return refused("it was already used")
	}
	x.nonce = requeststate.Nonce{}
	// The retry waits from now on: what the upstream sends once it has the
	// answers (progress) must find it.
	x.attachLocked(req)
	open := x.open[:0]
	for _, a := range x.open {
		if v, ok := answers[a.key]; ok {
			a.answer <- &jsonrpc.Message{Result: v}
			continue
		}
		open = append(open, a) // unanswered: asked again
	}
	x.open = open
	x.mu.Unlock()
	return b.await(ctx, req, x)
}

// inputResponses reads params.inputResponses: an object of objects.
func inputResponses(params json.RawMessage) (map[string]json.RawMessage, string) {
	raw := rawjson.Member(params, "inputResponses")
	if raw == nil || string(raw) == "null" {
		return nil, ""
	}
	out := map[string]json.RawMessage{}
	obj := rawjson.NewObject(raw)
	for obj.Next() {
		name := string(obj.Name())
		v := obj.Value()
		if len(v) == 0 || v[0] != '{' {
			return nil, fmt.Sprintf("inputResponses[%q] must be an object (the result of the input request)", name)
		}
		out[name] = v
	}
	if obj.Err() != nil {
		return nil, "inputResponses must be an object keyed by the inputRequests it answers"
	}
	return out, ""
}

// attach makes req the client request the exchange reports to.
func (x *exchange) attach(req *downstream.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.attachLocked(req)
}

func (x *exchange) attachLocked(req *downstream.Request) {
	x.waiter = req
	x.token = req.Meta()["progressToken"]
	if x.timer != nil {
		x.timer.Stop()
	}
}

// ask is the held request's Ask: it queues the upstream's request for the
// client's next round and waits for the answer the retry brings.
func (x *exchange) ask(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	a := &inputAsk{method: method, params: params, answer: make(chan *jsonrpc.Message, 1)}
	x.mu.Lock()
	if len(x.queued)+len(x.open) >= maxOpenInputs {
		x.mu.Unlock()
		return nil, errTooManyInputs
	}
	x.queued = append(x.queued, a)
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	select {
	case m := <-a.answer:
		return m, nil
	case <-ctx.Done():
		x.withdraw(a)
		return nil, ctx.Err()
	}
}

// withdraw forgets an upstream request that no longer awaits an answer.
func (x *exchange) withdraw(a *inputAsk) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.queued = without(x.queued, a)
	x.open = without(x.open, a)
}

func without(list []*inputAsk, a *inputAsk) []*inputAsk {
	for i, b := range list {
		if b == a {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// send is the held request's Send: what belongs to the request (progress)
// goes on the stream of the client request waiting now, progress under
// that request's token; between rounds it is dropped.
func (x *exchange) send(msg *jsonrpc.Message) bool {
	x.mu.Lock()
	w, token := x.waiter, x.token
	x.mu.Unlock()
	if w == nil || w.Send == nil {
		return false
	}
	if msg.Method == "notifications/message" && !x.cfg.WantsLog(w, msg.Params) {
		return false
	}
	if msg.Method == "notifications/progress" {
		if len(token) == 0 {
			return false
		}
		params, ok := rawjson.Replace(msg.Params, "progressToken", func([]byte) ([]byte, bool) { return token, true })
		if !ok {
			return false
		}
		msg = &jsonrpc.Message{Method: msg.Method, Params: params}
	}
	return w.Send(msg)
}
