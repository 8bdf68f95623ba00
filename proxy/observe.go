package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Observer is told what the proxy does, for metrics and the status page.
// ToolCalled runs on the path of every tools/call, so it must neither block
// nor do more than a few atomic operations; the others run rarely.
type Observer interface {
	// ToolCalled reports one finished tools/call: e is the catalog entry it
	// ran as, nil when no server exports the name.
	ToolCalled(e *catalog.Entry, outcome CallOutcome, elapsed time.Duration)
	// Reloaded reports one finished Reconcile.
	Reloaded(Reload)
	// InstanceEvent reports a change to one of server's instances: the
	// kinds of session.Event ("restarted", "lost", "replaced", ...).
	InstanceEvent(server, kind string)
}

// CallOutcome is how a tools/call ended.
type CallOutcome uint8

// The outcomes of a tools/call, as the metrics label them.
const (
	CallOK        CallOutcome = iota // a result without isError
	CallToolError                    // a result with isError: true
	CallError                        // a JSON-RPC error, from the upstream or the aggregator
	CallTimeout                      // no result within the tool's timeout
	CallCancelled                    // the client went away or cancelled
	callOutcomes
)

// CallOutcomes lists every outcome, in label order.
func CallOutcomes() []CallOutcome {
	out := make([]CallOutcome, 0, callOutcomes)
	for o := CallOutcome(0); o < callOutcomes; o++ {
		out = append(out, o)
	}
	return out
}

// String is the outcome's label value.
func (o CallOutcome) String() string {
	switch o {
	case CallOK:
		return "ok"
	case CallToolError:
		return "tool_error"
	case CallError:
		return "error"
	case CallTimeout:
		return "timeout"
	case CallCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// callOutcome classifies what the forwarder returns for a tools/call.
// callCtx is the call's own context, whose cause tells a timeout from
// other errors.
func callOutcome(callCtx context.Context, result json.RawMessage, rpcErr *jsonrpc.Error, err error) CallOutcome {
	return outcomeOf(callCtx, result, rpcErr, err, unread)
}

// toolErrorFlag is what the forwarder read of a result's isError, if it
// did (resultHead): the result then needs no scan of its own for it.
type toolErrorFlag uint8

const (
	unread toolErrorFlag = iota
	readFalse
	readTrue
)

// outcomeOf is callOutcome, with what the forwarder read of the result's
// isError.
func outcomeOf(callCtx context.Context, result json.RawMessage, rpcErr *jsonrpc.Error, err error, isError toolErrorFlag) CallOutcome {
	switch {
	case err != nil:
		return CallCancelled
	case callCtx != nil && callCtx.Err() != nil && errors.Is(context.Cause(callCtx), ErrTimeout):
		return CallTimeout
	case rpcErr != nil:
		return CallError
	case isError == readTrue, isError == unread && rawjson.IsTrue(result, "isError"):
		return CallToolError
	}
	return CallOK
}

// observeCall reports one call, which took elapsed, to the observer, if
// there is one. isError is what send read of the result's.
func (p *Proxy) observeCall(e *catalog.Entry, elapsed time.Duration, callCtx context.Context, result json.RawMessage, rpcErr *jsonrpc.Error, err error, isError toolErrorFlag) {
	if p.opts.Observer == nil {
		return
	}
	p.opts.Observer.ToolCalled(e, outcomeOf(callCtx, result, rpcErr, err, isError), elapsed)
}

// resultHeadNames are the members resultHead reads.
var resultHeadNames = [...]string{"resultType", "isError"}

// resultHead reads, in one pass over a tools/call result, whether it is a
// task handle of the tasks extension (as isTaskHandle) and whether it says
// isError: true (as callOutcome).
func resultHead(raw json.RawMessage) (taskHandle bool, isError toolErrorFlag) {
	var values [len(resultHeadNames)][]byte
	if rawjson.Members(raw, resultHeadNames[:], values[:]) != nil {
		return false, unread // not an object: each asks on its own
	}
	kind, _ := rawjson.String(values[0])
	isError = readFalse
	if v := values[1]; len(v) >= 4 && string(v[:4]) == "true" {
		isError = readTrue
	}
	return kind == "task", isError
}

// Reload outcomes.
const (
	ReloadOK       = "ok"       // every server of the config is running as configured
	ReloadPartial  = "partial"  // some servers failed and kept their last good state
	ReloadRejected = "rejected" // a workspace-level error: nothing changed
)

// Reload is one finished Reconcile, as the status page lists it.
type Reload struct {
	Time     time.Time     `json:"time"`
	Duration time.Duration `json:"-"`
	Outcome  string        `json:"outcome"`
	Version  uint64        `json:"registryVersion"`
	Changed  bool          `json:"changed"`
	Failed   []string      `json:"failed,omitempty"`
	// Errors are the reload's error problems, at most maxReloadErrors.
	Errors []string `json:"errors,omitempty"`
}

// maxReloadErrors bounds the problems one Reload keeps.
const maxReloadErrors = 5

func (p *Proxy) observeReload(start time.Time, ws *config.Workspace, report Report) {
	if p.opts.Observer == nil {
		return
	}
	r := Reload{Time: start, Duration: time.Since(start), Version: report.Version, Changed: report.Changed,
		Failed: append([]string(nil), report.Failed...), Outcome: ReloadOK}
	switch {
	case ws == nil:
		r.Outcome = ReloadRejected
	case len(report.Failed) > 0:
		r.Outcome = ReloadPartial
	}
	for _, pr := range report.Problems {
		if pr.Severity == config.SeverityError && len(r.Errors) < maxReloadErrors {
			r.Errors = append(r.Errors, pr.String())
		}
	}
	p.opts.Observer.Reloaded(r)
}

// Sessions is the number of connected downstream sessions.
func (p *Proxy) Sessions() int {
	return len(p.sessions.live())
}

// Readiness reports whether the aggregator is ready for traffic: the first
// config load is done and every server marked required is running, its
// shared instance up. notReady says what is missing, one line each.
func (p *Proxy) Readiness() (ready bool, notReady []string) {
	select {
	case <-p.loaded:
	default:
		return false, []string{"the first config load is still running"}
	}
	st := p.current()
	for _, id := range st.required {
		rs := st.servers[id]
		if rs == nil {
			why := st.failed[id].why
			if why == "" {
				why = "not running"
			}
			notReady = append(notReady, fmt.Sprintf("required server %q: %s", id, why))
			continue
		}
		if !rs.pool.Stateless() {
			continue // instances start per session; the server itself is up
		}
		if stats := rs.pool.Stats(); stats.Down != "" {
			notReady = append(notReady, fmt.Sprintf("required server %q is down (%s); restarting with backoff", id, stats.Down))
		} else if !stats.SharedAlive {
			notReady = append(notReady, fmt.Sprintf("required server %q is down; restarting", id))
		}
	}
	return len(notReady) == 0, notReady
}

// requiredServers lists the ids of ws's servers marked required.
func requiredServers(ws *config.Workspace) []string {
	var ids []string
	for _, s := range ws.Servers {
		if s.Required {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Required lists the servers marked required in the last good config.
func (p *Proxy) Required() []string {
	return append([]string(nil), p.current().required...)
}

// Servers lists the servers of the last good config, in config order,
// running or not.
func (p *Proxy) Servers() []string {
	return append([]string(nil), p.current().order...)
}
