package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Attribute keys: those of the OpenTelemetry MCP and GenAI conventions
// (development status), then the aggregator's own, for what the
// conventions have no name for.
const (
	keyMethod       = attribute.Key("mcp.method.name")
	keySession      = attribute.Key("mcp.session.id")
	keyProtocol     = attribute.Key("mcp.protocol.version")
	keyResourceURI  = attribute.Key("mcp.resource.uri")
	keyRequestID    = attribute.Key("jsonrpc.request.id")
	keyStatusCode   = attribute.Key("rpc.response.status_code")
	keyOperation    = attribute.Key("gen_ai.operation.name")
	keyToolName     = attribute.Key("gen_ai.tool.name")
	keyPromptName   = attribute.Key("gen_ai.prompt.name")
	keyErrorType    = attribute.Key("error.type")
	keyNetTransport = attribute.Key("network.transport")
	keyNetProtocol  = attribute.Key("network.protocol.name")
	keyServerAddr   = attribute.Key("server.address")
	keyServerPort   = attribute.Key("server.port")

	keyUpstreamServer    = attribute.Key("mcp_aggregator.upstream.server")
	keyUpstreamTransport = attribute.Key("mcp_aggregator.upstream.transport")
	keyUpstreamPID       = attribute.Key("mcp_aggregator.upstream.pid")
	keyUpstreamLease     = attribute.Key("mcp_aggregator.upstream.lease")
	keyExportedTool      = attribute.Key("mcp_aggregator.tool.exported_name")
)

// Bounds on what a client's request puts into a span.
const (
	maxTarget    = 64  // a tool or prompt name in a span's name
	maxAttribute = 512 // any other string taken from a request
)

// Request describes a downstream request for its span.
type Request struct {
	Method string
	ID     json.RawMessage
	// Params are the request's params, raw: the span reads the tool or
	// prompt name, the resource URI and _meta's trace context from them.
	Params json.RawMessage
	// Session names the downstream session as the logs, the status page
	// and /status.json do ("" when sessionless): a digest that tells
	// sessions apart without handing anyone a usable id. It is shown as
	// it is.
	Session  string
	Protocol string
	// Headers are the transport's trace context, used when _meta has none.
	Headers Headers
	// Exported reports whether name is one the server exports for Method (a
	// tool for tools/call, a prompt for prompts/get). Only such a name goes
	// into the span's name: a client can send any name, and a span name made
	// of it would give a tracing backend one series per made-up name. It is
	// asked once the request is served (a call made while the catalog loads
	// waits for it). Nil: no name goes into the span's name.
	Exported func(method, name string) bool
}

// Upstream describes a call to an upstream instance for its span.
type Upstream struct {
	Method string
	// Tool is the upstream's own name of the tool called (tools/call).
	Tool      string
	Server    string // the configured server id
	Transport string // stdio, streamable_http or sse
	// URL is a remote upstream's; only its host and port are recorded.
	URL       string
	PID       int  // a stdio instance's process
	Dedicated bool // leased to one session rather than shared
	Protocol  string
}

// Span is one recorded operation. A nil *Span does nothing.
type Span struct {
	span trace.Span
	// named, on a request's span, names it after its tool or prompt once
	// the request is served, if the aggregator exports that name.
	named func()
}

// StartRequest starts the span of a downstream request, a child of the
// trace context the client sent (in _meta, else in r.Headers), and
// returns a context that carries it. On a nil Tracer it returns ctx and a
// nil Span.
func (t *Tracer) StartRequest(ctx context.Context, r Request) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	params := readParams(r.Params)
	if remote := Remote(params.meta, r.Headers); remote.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, keyMethod.String(r.Method))
	if id := requestID(r.ID); id != "" {
		attrs = append(attrs, keyRequestID.String(id))
	}
	if r.Session != "" {
		attrs = append(attrs, keySession.String(shorten(r.Session, maxAttribute)))
	}
	if r.Protocol != "" {
		attrs = append(attrs, keyProtocol.String(r.Protocol))
	}
	target := ""
	switch r.Method {
	case "tools/call":
		attrs = append(attrs, keyOperation.String("execute_tool"))
		if params.name != "" {
			attrs = append(attrs, keyToolName.String(shorten(params.name, maxAttribute)))
			target = params.name
		}
	case "prompts/get":
		if params.name != "" {
			attrs = append(attrs, keyPromptName.String(shorten(params.name, maxAttribute)))
			target = params.name
		}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if params.uri != "" {
			attrs = append(attrs, keyResourceURI.String(safeURI(params.uri)))
		}
	}
	ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	s := &Span{span: span}
	if target != "" && r.Exported != nil {
		s.named = func() {
			if name := spanName(r.Method, target); name != r.Method && r.Exported(r.Method, target) {
				span.SetName(name)
			}
		}
	}
	return ctx, s
}

// StartUpstream starts the span of a call to an upstream instance, a child
// of the span in ctx, and returns a context that carries it. Its context
// is what the upstream is to receive in _meta (see Span.Meta). On a nil
// Tracer it returns ctx and a nil Span.
func (t *Tracer) StartUpstream(ctx context.Context, u Upstream) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, keyMethod.String(u.Method), keyUpstreamServer.String(u.Server))
	name := u.Method
	if u.Method == "tools/call" && u.Tool != "" {
		attrs = append(attrs, keyOperation.String("execute_tool"), keyToolName.String(u.Tool))
		name = spanName(u.Method, u.Tool)
	}
	if u.Protocol != "" {
		attrs = append(attrs, keyProtocol.String(u.Protocol))
	}
	if u.Transport != "" {
		attrs = append(attrs, keyUpstreamTransport.String(u.Transport))
	}
	if u.Transport == "stdio" {
		attrs = append(attrs, keyNetTransport.String("pipe"))
		if u.PID > 0 {
			attrs = append(attrs, keyUpstreamPID.Int(u.PID))
		}
	} else if u.URL != "" {
		attrs = append(attrs, keyNetTransport.String("tcp"), keyNetProtocol.String("http"))
		if parsed, err := url.Parse(u.URL); err == nil && parsed.Hostname() != "" {
			attrs = append(attrs, keyServerAddr.String(parsed.Hostname()))
			if port, err := strconv.Atoi(parsed.Port()); err == nil {
				attrs = append(attrs, keyServerPort.Int(port))
			}
		}
	}
	lease := "shared"
	if u.Dedicated {
		lease = "dedicated"
	}
	attrs = append(attrs, keyUpstreamLease.String(lease))
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &Span{span: span}
}

// Meta returns meta with the span's trace context as its traceparent and
// tracestate (see WithContext); on a nil Span, meta itself.
func (s *Span) Meta(meta map[string]json.RawMessage) map[string]json.RawMessage {
	if s == nil {
		return meta
	}
	return WithContext(meta, s.span.SpanContext())
}

// Context returns the span's own trace context (invalid on a nil Span).
func (s *Span) Context() trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return s.span.SpanContext()
}

// SetExportedName records the name a client called a tool by, when the
// upstream knows it by another.
func (s *Span) SetExportedName(name string) {
	if s == nil {
		return
	}
	s.span.SetAttributes(keyExportedTool.String(shorten(name, maxAttribute)))
}

// End ends the span with the operation's outcome: result, a JSON-RPC
// error, or err when no response came (the caller cancelled, the call
// timed out). A tool result with isError true counts as failed, with
// error.type tool_error, as the MCP conventions have it. The text of err is
// not recorded, only its kind: it may name what a span must not show.
func (s *Span) End(result json.RawMessage, rpcErr *jsonrpc.Error, err error) {
	if s == nil {
		return
	}
	switch {
	case err != nil:
		kind := "_OTHER"
		switch {
		case errors.Is(err, context.Canceled):
			kind = "cancelled"
		case errors.Is(err, context.DeadlineExceeded):
			kind = "timeout"
		}
		s.span.SetAttributes(keyErrorType.String(kind))
		s.span.SetStatus(codes.Error, kind)
	case rpcErr != nil:
		code := strconv.Itoa(rpcErr.Code)
		s.span.SetAttributes(keyErrorType.String(code), keyStatusCode.String(code))
		// The code, not the message: an upstream's error text may carry
		// what a trace must not show (a path, a token it echoed).
		s.span.SetStatus(codes.Error, "JSON-RPC error "+code)
	case isToolError(result):
		s.span.SetAttributes(keyErrorType.String("tool_error"))
		s.span.SetStatus(codes.Error, "tool_error")
	}
	s.span.End()
}

// EndMessage ends the span with a response; nil means no response is due
// because the client cancelled the request or went away.
func (s *Span) EndMessage(resp *jsonrpc.Message) {
	if s == nil {
		return
	}
	if s.named != nil {
		s.named()
	}
	if resp == nil {
		s.End(nil, nil, context.Canceled)
		return
	}
	s.End(resp.Result, resp.Error, nil)
}

// requestParams are the members of a request's params a span reads.
type requestParams struct {
	name, uri string
	meta      map[string]json.RawMessage
}

// readParams reads the tool or prompt name, the resource URI and the
// _meta members of params; what is missing or malformed stays empty.
func readParams(raw json.RawMessage) requestParams {
	var p requestParams
	obj := rawjson.NewObject(raw)
	for obj.Next() {
		switch string(obj.Name()) {
		case "name":
			if len(obj.Value()) <= maxAttribute {
				p.name, _ = rawjson.String(obj.Value())
			}
		case "uri":
			if len(obj.Value()) <= 4*maxAttribute {
				p.uri, _ = rawjson.String(obj.Value())
			}
		case "_meta":
			meta := rawjson.NewObject(obj.Value())
			m := map[string]json.RawMessage{}
			for meta.Next() {
				if k := string(meta.Name()); k == MetaTraceParent || k == MetaTraceState {
					m[k] = meta.Value()
				}
			}
			if meta.Err() == nil {
				p.meta = m
			}
		}
	}
	return p
}

// requestID renders a JSON-RPC id: a string's text, a number's digits.
func requestID(id json.RawMessage) string {
	if len(id) == 0 || string(id) == "null" {
		return ""
	}
	if s, ok := rawjson.String(id); ok {
		return shorten(s, maxAttribute)
	}
	return shorten(string(id), maxAttribute)
}

// spanName is "{method} {target}" as the MCP conventions name spans, or the
// method alone when the target is too long or odd to be a low-cardinality
// name (a client may call a tool by any name at all).
func spanName(method, target string) string {
	if len(target) > maxTarget {
		return method
	}
	for _, c := range target {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return method
		}
	}
	return method + " " + target
}

// safeURI is a resource URI as a span may show it: without user
// information (a password in a database URI), bounded in length.
func safeURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "" // not a URI a span can show safely
	}
	// Credentials, the query (signed URLs carry their signature there) and
	// the fragment stay out of traces.
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		uri = u.String()
	}
	return shorten(uri, maxAttribute)
}

// shorten bounds s to n bytes without splitting a character, and makes it
// valid UTF-8: OTLP refuses a batch with a string that is not.
func shorten(s string, n int) string {
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// isToolError reports whether a tools/call result says isError: true.
func isToolError(result json.RawMessage) bool {
	if len(result) == 0 {
		return false
	}
	return string(rawjson.Member(result, "isError")) == "true"
}
