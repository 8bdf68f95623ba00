package proxy

import (
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// timeLimit is how long a request may go without an answer (progress
// restarts it), and the setting it comes from, which an error about a
// request that ran past it names: raising any other setting changes nothing.
type timeLimit struct {
	d       time.Duration
	setting string // request_timeout, tools.defaults.timeout or tools.config.<tool>.timeout
}

// requestLimit is the limit of a request to s that is no tool call.
func requestLimit(s *config.Server) timeLimit {
	return timeLimit{d: s.RequestTimeout, setting: "request_timeout"}
}

// toolLimit is the limit of a call of e, a tool of s: its tools.config
// entry's timeout, else tools.defaults', else request_timeout, as the
// naming plan merged them into e.Settings and catalog.Plan named the
// setting (e.TimeoutSetting).
func toolLimit(s *config.Server, e *catalog.Entry) timeLimit {
	if e.Settings.Timeout <= 0 || e.TimeoutSetting == "" {
		return requestLimit(s)
	}
	return timeLimit{d: e.Settings.Timeout, setting: e.TimeoutSetting}
}
