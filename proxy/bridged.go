package proxy

import (
	"context"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/bridge"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The bridge (package bridge) holds the requests of protocol 2026-07-28
// clients while their upstream awaits input; what it asks of the proxy is
// here: who the caller is, what its requests declare, where the run's log
// messages go.

// bridgeConfig is the proxy's part of the bridge.
func (p *Proxy) bridgeConfig() bridge.Config {
	return bridge.Config{
		Hold:       serverRequestTimeout,
		CallerOf:   callerOf,
		Undeclared: undeclared,
		WantsLog:   wantsLog,
		Caller: func(held *downstream.Request, level string) upstream.Caller {
			return &requestCaller{p: p, req: held, level: level}
		},
	}
}

// bridged serves req with serve, through the bridge when the request is
// bridgeable (bridge.Bridge.Serve).
func (p *Proxy) bridged(ctx context.Context, req *downstream.Request, serve func(context.Context, *downstream.Request) *jsonrpc.Message) *jsonrpc.Message {
	return p.bridge.Serve(ctx, req, serve)
}

// callerOf is the identity a requestState is bound to: the lease key, which
// is what the caller's upstream instances are chosen by, and the principal
// the request is made for (principalOf: without authentication, its
// address where the aggregator tells clients apart by address), which is
// what a policy rule's question names and its answer approves for.
func callerOf(req *downstream.Request) string {
	key, _ := LeaseKeyOf(req, req.Meta()) // the client's own: another client cannot resume it
	return key.String() + "\x00" + principalOf(req).String()
}

// undeclared is the refusal of an upstream request (method, params) that
// the client request waiting now did not declare the capability for (nil
// when it did).
func undeclared(waiter *downstream.Request, method string, params json.RawMessage) *jsonrpc.Error {
	caps := waiter.ClientCapabilities
	need := capabilityOf(method)
	switch {
	case need != "" && !declares(caps, need):
		return jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the client's retry did not declare the %s capability; %s cannot be relayed to it", need, method)
	case method == "elicitation/create" && urlMode(params) && !declaresURLElicitation(caps):
		return jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the client's retry did not declare the elicitation.url capability; a URL-mode elicitation/create cannot be relayed to it")
	}
	return nil
}

// wantsLog reports whether the client request waiting takes a log message
// of the level params name: each request of protocol 2026-07-28 names its
// own level in _meta, and one that names none takes no log messages, so
// the level of the request that started the exchange does not carry over
// to its retries.
func wantsLog(w *downstream.Request, params json.RawMessage) bool {
	if w.Msg == nil {
		return false
	}
	want, ok := logLevels[metaString(w.Msg.Params, downstream.MetaLogLevel)]
	if !ok {
		return false
	}
	var head struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(params, &head)
	got, ok := logLevels[head.Level]
	return ok && got >= want
}
