package proxy

import (
	"context"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/bridge"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// A protocol 2026-07-28 upstream logs for a request only when the request
// names a log level in its _meta. The aggregator names the caller's: a
// client of that generation's own (none when it named none), an older
// client's session level (logging/setLevel, or the default). Log messages
// an upstream sends on the response stream of a request go to the client
// request it serves (requestLogs); others are attributed in notify.go.

// levelNames are the log levels by rank (logLevels reversed).
var levelNames = func() []string {
	out := make([]string, len(logLevels))
	for name, rank := range logLevels {
		out[rank] = name
	}
	return out
}()

// requestCaller is a downstream request as the upstream requests made to serve
// it see it: its log level, and the log messages sent on their response
// streams go to it.
type requestCaller struct {
	p     *Proxy
	req   *downstream.Request
	level string
}

func (c *requestCaller) LogLevel() string { return c.level }

func (c *requestCaller) Log(inst *upstream.Instance, params json.RawMessage) {
	level, msg, ok := logNotification(inst.Server(), params)
	if !ok {
		c.p.badLogLevel(inst.Server(), params)
		return
	}
	c.p.logToRequest(c.req, level, msg)
}

// withCallerLogLevel returns ctx whose upstream requests serve req: they
// carry the log level the caller of req wants, and their log messages go
// to req.
//
// A tools/call the bridge does not hold is named its caller by send, and
// only when it goes to an upstream that reads it (readsCaller): most calls
// go to one that does not, and the caller costs two allocations and three
// locks.
func (p *Proxy) withCallerLogLevel(ctx context.Context, req *downstream.Request) context.Context {
	switch req.Msg.Method {
	case "tools/call":
		if !bridge.Bridgeable(req) {
			return ctx // send's (callerFor)
		}
	case "prompts/get", "resources/read", "completion/complete", "tasks/result":
	default:
		return ctx // served here, or not long enough to log for
	}
	return p.withCaller(ctx, req)
}

// withCaller returns ctx whose upstream requests serve req
// (withCallerLogLevel), whatever its method.
func (p *Proxy) withCaller(ctx context.Context, req *downstream.Request) context.Context {
	c := &requestCaller{p: p, req: req}
	if req.Sessionless() {
		c.level = metaString(req.Msg.Params, downstream.MetaLogLevel)
	} else if s := p.sessions.find(req.Session); s.offered().logging {
		// A session not offered logging takes no log messages: none is asked for.
		c.level = levelNames[s.logLevel()]
	}
	return upstream.WithCaller(ctx, c)
}

// callerFor is ctx for a tools/call's request to inst, an instance of rs:
// named the caller of req (withCaller) when inst reads it and ctx names
// none yet (the bridge names its own). An upstream reads the caller to ask
// a sessionless (2026-07-28) upstream for the caller's log level, and, over
// HTTP, to hand it the log messages sent on the request's response stream;
// an older upstream over stdio reads neither (its log messages are
// attributed in notify.go).
func (p *Proxy) callerFor(ctx context.Context, req *downstream.Request, rs *runningServer, inst *upstream.Instance) context.Context {
	if req == nil || !readsCaller(rs, inst) || upstream.CallerOf(ctx) != nil {
		return ctx
	}
	return p.withCaller(ctx, req)
}

// readsCaller reports whether inst, an instance of rs, reads the caller of
// its requests (callerFor).
func readsCaller(rs *runningServer, inst *upstream.Instance) bool {
	return rs == nil || rs.cfg.Transport != config.TransportStdio || protocol.Modern(inst.Protocol())
}

// logNotification is an upstream's log message as the aggregator relays it
// to a request, and its level's rank; ok is false for a message whose level
// is none of MCP's, which a client that checks messages against the schema
// would reject: such a message is not relayed.
func logNotification(server string, params json.RawMessage) (level int, msg *jsonrpc.Message, ok bool) {
	var head struct {
		Level  string          `json:"level"`
		Logger json.RawMessage `json:"logger"`
	}
	_ = json.Unmarshal(params, &head)
	if level, ok = logLevels[head.Level]; !ok {
		return 0, nil, false
	}
	if len(head.Logger) == 0 {
		// Say which server spoke; the upstream's own logger name is kept.
		params = rawjson.Add(params, "logger", mustJSON(server))
	}
	return level, &jsonrpc.Message{Method: "notifications/message", Params: params}, true
}

// logToRequest sends a log message that belongs to req on its stream, when
// its caller wants that level: a 2026-07-28 request's own level (none
// without one), an older client's session level.
func (p *Proxy) logToRequest(req *downstream.Request, level int, msg *jsonrpc.Message) {
	if req.Sessionless() {
		if reqLevel, ok := logLevels[metaString(req.Msg.Params, downstream.MetaLogLevel)]; ok && level >= reqLevel {
			req.Send(msg)
		}
		return
	}
	if p.takesLog(req.Session, level) {
		req.Send(msg)
	}
}
