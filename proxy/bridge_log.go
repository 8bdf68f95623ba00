package proxy

import (
	"context"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
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
func (p *Proxy) withCallerLogLevel(ctx context.Context, req *downstream.Request) context.Context {
	switch req.Msg.Method {
	case "tools/call", "prompts/get", "resources/read", "completion/complete", "tasks/result":
	default:
		return ctx // served here, or not long enough to log for
	}
	c := &requestCaller{p: p, req: req}
	if req.Sessionless() {
		c.level = metaString(req.Msg.Params, downstream.MetaLogLevel)
	} else if s := p.sessions.find(req.Session); s.offered().logging {
		// A session not offered logging takes no log messages: none is asked for.
		c.level = levelNames[s.logLevel()]
	}
	return upstream.WithCaller(ctx, c)
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
