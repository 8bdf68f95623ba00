package proxy

import (
	"context"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/telemetry"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// traced serves a request in a span that continues the client's trace
// (Options.Tracer is set).
func (p *Proxy) traced(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	r := telemetry.Request{Method: req.Msg.Method, ID: req.Msg.ID, Params: req.Msg.Params, Protocol: req.Protocol,
		Headers: telemetry.Headers{TraceParent: req.TraceParent, TraceState: req.TraceState}, Exported: p.exported}
	if req.Session != nil {
		r.Session = sessionDigest(sessionLeaseKey(req.Session))
	}
	ctx, span := p.opts.Tracer.StartRequest(ctx, r)
	resp := p.dispatch(ctx, req)
	span.EndMessage(resp)
	return resp
}

// upstreamSpan starts the span of a request to the instance grant holds, a
// child of the span in ctx; nil when tracing is off. tool is the
// upstream's name of the tool a tools/call calls.
func (p *Proxy) upstreamSpan(ctx context.Context, method, tool string, rs *runningServer, grant *session.Grant) (context.Context, *telemetry.Span) {
	if p.opts.Tracer == nil {
		return ctx, nil
	}
	u := telemetry.Upstream{Method: method, Tool: tool, Server: rs.cfg.ID, Transport: string(rs.cfg.Transport),
		PID: grant.Instance.PID(), Dedicated: !rs.pool.Stateless(), Protocol: grant.Instance.Protocol()}
	if rs.cfg.Transport != config.TransportStdio {
		u.URL = rs.cfg.URL
	}
	return p.opts.Tracer.StartUpstream(ctx, u)
}

// exported reports whether name is a tool (tools/call) or a prompt
// (prompts/get) the aggregator exports now.
func (p *Proxy) exported(method, name string) bool {
	switch method {
	case "tools/call":
		_, ok := p.Catalog().Lookup(name)
		return ok
	case "prompts/get":
		_, ok := p.current().surface.Prompt(name)
		return ok
	}
	return false
}
