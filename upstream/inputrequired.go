package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// A sessionless upstream that needs input in the middle of tools/call,
// prompts/get or resources/read answers input_required: the requests it
// needs answered (elicitation/create, sampling/createMessage, roots/list)
// and an opaque requestState. The instance answers each through the
// request's OnServerRequest, exactly as it answers an older upstream's own
// requests, then sends the request again with inputResponses and the
// requestState, until the upstream gives its result. The caller sees only
// that result; what it asked of the client is what an older upstream would
// have asked.

// Bounds on an upstream's input_required rounds.
const (
	// maxInputRounds bounds the rounds of one request.
	maxInputRounds = 16
	// maxInputRequests bounds the input requests of one round.
	maxInputRequests = maxServerRequests
	// sheddingPause is the pause before retrying a round that asked for no
	// input, only that the request be sent again (load shedding).
	sheddingPause = 250 * time.Millisecond
)

// multiRound reports whether method may be answered input_required.
func multiRound(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read":
		return true
	}
	return false
}

// inputRound is one input_required result.
type inputRound struct {
	requests map[string]inputRequest
	state    *string
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// asInputRequired reads result as input_required; ok is false for any other
// result (a final one).
func asInputRequired(result json.RawMessage) (inputRound, bool, error) {
	kind, _ := rawjson.String(rawjson.Member(result, "resultType"))
	if kind != "input_required" {
		return inputRound{}, false, nil
	}
	var r struct {
		Requests map[string]inputRequest `json:"inputRequests"`
		State    *string                 `json:"requestState"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return inputRound{}, true, fmt.Errorf("malformed input_required result: %v", err)
	}
	switch {
	case len(r.Requests) == 0 && r.State == nil:
		return inputRound{}, true, fmt.Errorf("input_required result with neither inputRequests nor requestState")
	case len(r.Requests) > maxInputRequests:
		return inputRound{}, true, fmt.Errorf("input_required result with %d input requests; at most %d are answered", len(r.Requests), maxInputRequests)
	}
	for key, req := range r.Requests {
		switch req.Method {
		case "elicitation/create", "sampling/createMessage", "roots/list":
		default:
			return inputRound{}, true, fmt.Errorf("input request %q: %q is not a request protocol 2026-07-28 allows in inputRequests", key, req.Method)
		}
	}
	return inputRound{requests: r.Requests, state: r.State}, true, nil
}

// rounds sends a request to a sessionless upstream and answers its
// input_required results until it gives its final result.
func (i *Instance) rounds(ctx context.Context, r Request, params json.RawMessage) (json.RawMessage, error) {
	next := params
	for round := 1; ; round++ {
		var p any
		if len(next) > 0 {
			p = next
		}
		raw, err := i.conn.call(ctx, r.Method, p)
		if err != nil {
			return nil, err
		}
		in, ok, err := asInputRequired(raw)
		switch {
		case err != nil:
			return nil, fmt.Errorf("server %q: %s: %w", i.server, r.Method, err)
		case !ok:
			return raw, nil
		case round > maxInputRounds:
			return nil, fmt.Errorf("server %q: %s: still asked for input after %d rounds; the request was abandoned", i.server, r.Method, maxInputRounds)
		}
		responses, err := i.fulfil(ctx, r, in)
		if err != nil {
			return nil, err
		}
		if next, err = retryParams(params, responses, in.state); err != nil {
			return nil, fmt.Errorf("server %q: %s: %w", i.server, r.Method, err)
		}
	}
}

// fulfil answers one round's input requests, all at once, through the
// request's handler. The first failure ends the others and the request:
// inputResponses have no place for an error.
func (i *Instance) fulfil(ctx context.Context, r Request, in inputRound) (json.RawMessage, error) {
	if len(in.requests) == 0 {
		t := time.NewTimer(sheddingPause)
		defer t.Stop()
		select {
		case <-t.C:
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if r.OnServerRequest == nil {
		return nil, fmt.Errorf("server %q: %s: it asked for input, and this request has no client to ask", i.server, r.Method)
	}
	keys := make([]string, 0, len(in.requests))
	for k := range in.requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results = make(map[string]json.RawMessage, len(keys))
		failed  error
	)
	for _, key := range keys {
		req := in.requests[key]
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := req.Params
			if string(params) == "null" {
				params = nil
			}
			result, rpcErr := r.OnServerRequest(ctx, req.Method, params)
			mu.Lock()
			defer mu.Unlock()
			if rpcErr != nil {
				if failed == nil {
					failed = &RPCError{Code: rpcErr.Code, Data: rpcErr.Data,
						Message: fmt.Sprintf("server %q asked for input %q (%s), which failed: %s", i.server, key, req.Method, rpcErr.Message)}
					cancel()
				}
				return
			}
			if len(result) == 0 {
				result = json.RawMessage(`{}`)
			}
			results[key] = result
		}()
	}
	wg.Wait()
	if failed != nil {
		if ctx.Err() != nil && context.Cause(ctx) != context.Canceled {
			return nil, context.Cause(ctx)
		}
		return nil, failed
	}
	out := []byte{'{'}
	for n, key := range keys {
		if n > 0 {
			out = append(out, ',')
		}
		out = rawjson.AppendString(out, key)
		out = append(out, ':')
		out = append(out, results[key]...)
	}
	return append(out, '}'), nil
}

// retryParams is the original params with the round's inputResponses and
// requestState set; every other byte stays.
func retryParams(params, responses json.RawMessage, state *string) (json.RawMessage, error) {
	out := params
	if len(out) == 0 {
		out = json.RawMessage(`{}`)
	}
	var ok bool
	if len(responses) > 0 {
		if out, ok = rawjson.Set(out, "inputResponses", func([]byte) []byte { return responses }); !ok {
			return nil, fmt.Errorf("params are not a JSON object")
		}
	}
	if state != nil {
		quoted := rawjson.AppendString(nil, *state)
		if out, ok = rawjson.Set(out, "requestState", func([]byte) []byte { return quoted }); !ok {
			return nil, fmt.Errorf("params are not a JSON object")
		}
	}
	return out, nil
}

// unattributed is the error an upstream gets for a request of its own that
// no in-flight request claims. Over stdio, and on the GET stream of HTTP, a
// request of the upstream does not say which request of the aggregator it
// belongs to: with several in flight on a shared instance, answering it for
// any one of them could hand one client's answer to another's call, so none
// does, and the upstream's call fails instead of a wrong one.
func (i *Instance) unattributed(method string) *jsonrpc.Error {
	i.flights.mu.Lock()
	n, principals := i.flights.askers()
	i.flights.mu.Unlock()
	if n < 2 {
		return jsonrpc.Errorf(CodeUnattributed,
			"server %q: %s cannot be attributed to one downstream session of the aggregator (no request in flight claims it); it was not relayed",
			i.server, method)
	}
	return jsonrpc.Errorf(CodeUnattributed,
		"server %q: %s cannot be attributed to one downstream session of the aggregator: %d requests of %d clients that could be asking are in flight on this instance "+
			"and the request does not say which it belongs to; it was not relayed. To ask clients in the middle of concurrent calls, lease the server "+
			"(truely-stateless: false, the default: each client gets its own instance) or serve the upstream over streamable HTTP",
		i.server, method, n, principals)
}
