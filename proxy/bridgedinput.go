package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Input during a bridged task. A 2025-11-25 upstream whose task needs
// input asks for it with a request of its own (elicitation/create,
// sampling/createMessage, roots/list) naming the task in its related-task
// _meta: of its own accord on a shared instance, or while a requestor waits
// in tasks/result (status input_required, the upstream's message queue).
// The extension's client hears of neither: it polls tasks/get. So such a
// request is held, and tasks/get shows it among the task's inputRequests
// (status input_required while any is held); the client's tasks/update
// answers it by its key, and the answer goes upstream as the request's
// result. When tasks/get finds the task input_required with nothing held,
// the aggregator opens a tasks/result of its own to the upstream (one per
// task at a time, bounded by the tool's call timeout) for the requests to
// come. Bounds: maxHeldInputs requests per task, maxInputParams bytes each,
// serverRequestTimeout for a client to answer one.

const (
	// maxHeldInputs bounds the requests held for one task at once.
	maxHeldInputs = 16
	// maxInputParams bounds the params of one held request, in bytes.
	maxInputParams = 1 << 20
	// inputArrival bounds how long tasks/get, which opened a tasks/result
	// for an input_required task, waits for the request it asks for.
	inputArrival = 2 * time.Second
)

// taskInputs holds the requests bridged tasks wait on, per task.
type taskInputs struct {
	mu sync.Mutex
	m  map[*tasks.Entry]*taskInput
}

// taskInput is what one bridged task waits on: its held requests by key,
// and whether the aggregator's tasks/result for it is open.
type taskInput struct {
	next     int
	held     map[string]*heldInput
	order    []string // keys in the order the requests came
	draining bool
	arrived  chan struct{} // closed, and replaced, whenever a request is held
}

// heldInput is one upstream request waiting for the client's answer.
type heldInput struct {
	method string
	params json.RawMessage // as the client sees them
	answer chan json.RawMessage
}

// inputOfLocked returns e's taskInput, made when create is true (nil
// otherwise when there is none). Callers hold ti.mu.
func (ti *taskInputs) inputOfLocked(e *tasks.Entry, create bool) *taskInput {
	in := ti.m[e]
	if in == nil && create {
		if ti.m == nil {
			ti.m = map[*tasks.Entry]*taskInput{}
		}
		in = &taskInput{held: map[string]*heldInput{}, arrived: make(chan struct{})}
		ti.m[e] = in
	}
	return in
}

// dropIfIdleLocked forgets e's taskInput once nothing waits on it.
func (ti *taskInputs) dropIfIdleLocked(e *tasks.Entry) {
	if in := ti.m[e]; in != nil && len(in.held) == 0 && !in.draining {
		delete(ti.m, e)
	}
}

// bridgedInputRequest holds inst's request (method, params) about e, a
// bridged task, until the client answers it with tasks/update, and returns
// that answer for the upstream.
func (p *Proxy) bridgedInputRequest(ctx context.Context, e *tasks.Entry, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	switch method {
	case "elicitation/create", "sampling/createMessage", "roots/list":
	default:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "the aggregator does not relay %s to a client of the tasks extension", method)
	}
	if len(params) > maxInputParams {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: params of %d bytes; at most %d are held for a client of the tasks extension", method, len(params), maxInputParams)
	}
	h := &heldInput{method: method, params: p.relatedToClient(params, e.Inst, e.Owner), answer: make(chan json.RawMessage, 1)}
	ti := &p.taskInputs
	ti.mu.Lock()
	in := ti.inputOfLocked(e, true)
	if len(in.held) >= maxHeldInputs {
		ti.mu.Unlock()
		return nil, jsonrpc.Errorf(codeInternal, "%s: task already waits on %d requests, the most the aggregator holds for one task", method, maxHeldInputs)
	}
	in.next++
	key := "input-" + strconv.Itoa(in.next)
	in.held[key] = h
	in.order = append(in.order, key)
	close(in.arrived)
	in.arrived = make(chan struct{})
	ti.mu.Unlock()
	defer func() {
		ti.mu.Lock()
		if in.held[key] == h {
			delete(in.held, key)
			for i, k := range in.order {
				if k == key {
					in.order = append(in.order[:i:i], in.order[i+1:]...)
					break
				}
			}
		}
		ti.dropIfIdleLocked(e)
		ti.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	select {
	case result := <-h.answer:
		if result == nil {
			return nil, jsonrpc.Errorf(codeInternal, "%s: the client cancelled the task (tasks/cancel) instead of answering", method)
		}
		return p.relatedToUpstream(result, e.Owner, e.Inst), nil
	case <-ctx.Done():
		return nil, jsonrpc.Errorf(codeInternal, "%s: the client of the tasks extension did not answer (tasks/update) within %s", method, serverRequestTimeout)
	case <-p.life.Done():
		return nil, jsonrpc.Errorf(codeInternal, "%s: the aggregator is shutting down", method)
	}
}

// heldInputRequests is e's held requests as the extension's inputRequests
// member, nil when none is held.
func (p *Proxy) heldInputRequests(e *tasks.Entry) json.RawMessage {
	ti := &p.taskInputs
	ti.mu.Lock()
	defer ti.mu.Unlock()
	in := ti.inputOfLocked(e, false)
	if in == nil || len(in.order) == 0 {
		return nil
	}
	out := []byte{'{'}
	for i, key := range in.order {
		h := in.held[key]
		if i > 0 {
			out = append(out, ',')
		}
		out = rawjson.AppendString(out, key)
		out = append(out, `:{"method":`...)
		out = rawjson.AppendString(out, h.method)
		if len(h.params) > 0 {
			out = append(out, `,"params":`...)
			out = append(out, h.params...)
		}
		out = append(out, '}')
	}
	return append(out, '}')
}

// answerHeldInputs gives the client's inputResponses to e's held requests;
// keys of none (answered already, or never asked) are ignored, as the
// extension has it.
func (p *Proxy) answerHeldInputs(e *tasks.Entry, responses map[string]json.RawMessage) {
	ti := &p.taskInputs
	ti.mu.Lock()
	defer ti.mu.Unlock()
	in := ti.inputOfLocked(e, false)
	if in == nil {
		return
	}
	for key, result := range responses {
		h := in.held[key]
		if h == nil {
			continue
		}
		delete(in.held, key)
		for i, k := range in.order {
			if k == key {
				in.order = append(in.order[:i:i], in.order[i+1:]...)
				break
			}
		}
		h.answer <- result
	}
}

// dropHeldInputs refuses e's held requests: the client cancelled the task.
func (p *Proxy) dropHeldInputs(e *tasks.Entry) {
	ti := &p.taskInputs
	ti.mu.Lock()
	defer ti.mu.Unlock()
	in := ti.inputOfLocked(e, false)
	if in == nil {
		return
	}
	for key, h := range in.held {
		delete(in.held, key)
		h.answer <- nil
	}
	in.order = nil
}

// drainTaskInput opens a tasks/result for e, an input_required bridged
// task with nothing held, so that the upstream sends the requests it
// waits on (2025-11-25 delivers them during tasks/result); one at a time
// per task. It waits, at most inputArrival, for a request to be held.
func (p *Proxy) drainTaskInput(e *tasks.Entry) {
	ti := &p.taskInputs
	ti.mu.Lock()
	in := ti.inputOfLocked(e, true)
	if len(in.held) > 0 {
		ti.mu.Unlock()
		return
	}
	arrived := in.arrived
	start := !in.draining
	in.draining = true
	ti.mu.Unlock()
	done := make(chan struct{})
	if start {
		go func() {
			defer close(done)
			params := rawjson.AppendString([]byte(`{"taskId":`), e.UpstreamID)
			params = append(params, '}')
			inv := invocation{method: "tasks/result", server: e.Server, params: params, key: e.Lease, onTask: e,
				limit: timeLimit{d: e.Timeout, setting: e.TimeoutSetting},
				ask: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
					return p.bridgedInputRequest(ctx, e, method, params)
				}}
			_, rpcErr, _ := p.send(p.life, &inv)
			if rpcErr != nil {
				p.log.Debug("tasks/result for a bridged task's input ended", "server", e.Server, "task", e.ID, "err", rpcErr.Message)
			}
			ti.mu.Lock()
			in.draining = false
			ti.dropIfIdleLocked(e)
			ti.mu.Unlock()
		}()
	}
	timer := time.NewTimer(inputArrival)
	defer timer.Stop()
	select {
	case <-arrived:
	case <-done:
	case <-timer.C:
	}
}

// inputResponsesOf reads params.inputResponses of tasks/update: an object
// of objects, at most maxHeldInputs of them.
func inputResponsesOf(params json.RawMessage) (map[string]json.RawMessage, string) {
	raw := rawjson.Member(params, "inputResponses")
	if raw == nil {
		return nil, "tasks/update needs params.inputResponses: an object keyed by the inputRequests of tasks/get it answers"
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		return nil, "params.inputResponses must be an object keyed by the inputRequests of tasks/get it answers"
	}
	if len(out) > maxHeldInputs {
		return nil, "params.inputResponses answers " + strconv.Itoa(len(out)) + " requests; a task has at most " + strconv.Itoa(maxHeldInputs) + " held at once"
	}
	for key, v := range out {
		if len(bytes.TrimSpace(v)) == 0 || bytes.TrimSpace(v)[0] != '{' {
			return nil, "params.inputResponses[" + strconv.Quote(key) + "] must be an object (the result of the request it answers)"
		}
	}
	return out, ""
}

// bridgedOwner reports whether e is a task of the tasks extension that a
// 2025-11-25 upstream runs: its owner is a conversation (a sessionless
// client's), not a downstream session, and its instance is older.
func bridgedOwner(e *tasks.Entry) bool {
	_, session := e.Owner.SessionID()
	return !session && !protocol.Modern(e.Inst.Protocol())
}

// bridgedRequests wraps base, which answers inst's requests during a call
// of a sessionless client that declared the tasks extension, so that a
// request naming a bridged task of the aggregator's (its related-task
// _meta) is held for the task's client rather than asked at once: the call
// answers with the task, and the client hears of it polling tasks/get.
func (p *Proxy) bridgedRequests(base upstream.ServerRequestHandler, inst *upstream.Instance) upstream.ServerRequestHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		if up, ok := tasks.StringAt(params, tasks.RelatedIDPath); ok {
			if e, known := p.awaitTask(ctx, inst, up); known && bridgedOwner(e) {
				return p.bridgedInputRequest(ctx, e, method, params)
			}
		}
		return base(ctx, method, params)
	}
}
