package proxy

import (
	"context"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// A protocol 2026-07-28 upstream logs for a request only when the request
// names a log level in its _meta. The aggregator names the caller's: a
// client of that generation's own (none when it named none), an older
// client's session level (logging/setLevel, or the default). Log messages
// the upstream sends while the request runs go to that request (notify.go).

// levelNames are the log levels by rank (logLevels reversed).
var levelNames = func() []string {
	out := make([]string, len(logLevels))
	for name, rank := range logLevels {
		out[rank] = name
	}
	return out
}()

// withCallerLogLevel returns ctx carrying the log level the caller of req
// wants, for the upstream requests made to serve it.
func (p *Proxy) withCallerLogLevel(ctx context.Context, req *downstream.Request) context.Context {
	switch req.Msg.Method {
	case "tools/call", "prompts/get", "resources/read", "completion/complete", "tasks/result":
	default:
		return ctx // served here, or not long enough to log for
	}
	if req.Session == nil || downstream.Modern(req.Protocol) {
		level := metaString(req.Msg.Params, downstream.MetaLogLevel)
		if level == "" {
			return ctx
		}
		return upstream.WithLogLevel(ctx, level)
	}
	rank, set := p.levels.get(req.Session.Key())
	if !set {
		rank = defaultLogLevel
	}
	return upstream.WithLogLevel(ctx, levelNames[rank])
}
