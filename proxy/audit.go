package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/audit"
	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// setAudit opens the audit log cfg asks for, when it differs from the one
// open, and closes the old one once the new one is in place. A log that
// cannot be opened is an error in the log, and the old one stays.
func (p *Proxy) setAudit(cfg config.Audit) {
	p.auditMu.Lock()
	defer p.auditMu.Unlock()
	want := audit.Config{To: cfg.To, MaxBytes: int64(cfg.MaxSizeMB) << 20, Keep: cfg.Keep, Args: cfg.Args}
	if want.MaxBytes == 0 {
		want.MaxBytes = audit.DefaultMaxBytes
	}
	if want.Keep == 0 {
		want.Keep = audit.DefaultKeep
	}
	old := p.audit.Load()
	if (old == nil && cfg.To == "") || (old != nil && old.Config() == want) {
		return
	}
	var next *audit.Log
	if cfg.To != "" {
		l, err := audit.Open(want, p.log)
		if err != nil {
			p.log.Error("the audit log could not be opened; the last one stays", "to", cfg.To, "err", err)
			return
		}
		next = l
	}
	p.audit.Store(next)
	if old != nil {
		p.auditDropped.Add(old.Dropped())
		old.Close()
	}
}

// closeAudit flushes and closes the audit log at shutdown.
func (p *Proxy) closeAudit() {
	p.auditMu.Lock()
	defer p.auditMu.Unlock()
	if old := p.audit.Swap(nil); old != nil {
		p.auditDropped.Add(old.Dropped())
		old.Close()
	}
}

// AuditDropped is how many audit records were dropped because the writer
// could not keep up (the metric mcp_aggregator_audit_dropped_total).
func (p *Proxy) AuditDropped() uint64 {
	return p.auditDropped.Load() + p.audit.Load().Dropped()
}

// Audit writes r to the audit log, when one is set; a nil check
// otherwise. It is the hook for decisions made outside a tool call (a
// login, a token exchange): Time is set when zero. It never blocks.
func (p *Proxy) Audit(r audit.Record) {
	l := p.audit.Load()
	if l == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	l.Write(r)
}

// AuditPrincipal names who in an audit record (for Audit).
func AuditPrincipal(c identity.Caller) audit.Principal { return auditPrincipal(c, c.Principal) }

// auditCall writes the audit record of one tool call. Without an audit
// log it is never called (a nil check at the call site).
// The call ended at end, elapsed after it came.
func (p *Proxy) auditCall(l *audit.Log, e *catalog.Entry, name string, inv invocation, v verdict, end time.Time, elapsed time.Duration,
	result json.RawMessage, rpcErr *jsonrpc.Error, err error) {
	r := audit.Record{Time: end.Add(-elapsed).UTC(), Event: "tools/call", Method: "tools/call", Tool: name, Rule: v.rule,
		DurationMS: float64(elapsed.Microseconds()) / 1000, BytesIn: len(inv.args)}
	if e != nil {
		r.Server, r.Tool, r.Original = e.Server, e.Exported, e.Original
	}
	if len(inv.args) > 0 {
		sum := sha256.Sum256(inv.args)
		r.ArgsSHA256 = hex.EncodeToString(sum[:])
		if l.Args() {
			var args map[string]any
			if json.Unmarshal(inv.args, &args) == nil {
				r.Args, _ = json.Marshal(RedactArgs(args))
			}
		}
	}
	if req := inv.req; req != nil {
		r.Principal = auditPrincipal(req.Caller(), principalOf(req))
		if !req.Sessionless() && req.Session != nil && req.Session.Key() != "" {
			r.Session = downstream.SessionDigest(req.Session.Key())
		}
		r.TraceID = traceID(req.TraceParent)
		r.View = req.View
	} else {
		r.Principal = audit.Principal{Kind: "local"}
	}
	switch {
	case v.outcome != "" && v.outcome != audit.Approved:
		r.Outcome = v.outcome
	case err != nil || rpcErr != nil || isToolError(result):
		r.Outcome = audit.Error
	case v.outcome == audit.Approved:
		r.Outcome = audit.Approved
	default:
		r.Outcome = audit.OK
	}
	r.BytesOut = len(result)
	if rpcErr != nil {
		r.BytesOut = len(rpcErr.Message) + len(rpcErr.Data)
	}
	l.Write(r)
}

// auditPrincipal names who in an audit record: never a token, only the
// issuer, subject and client.
func auditPrincipal(c identity.Caller, who identity.Principal) audit.Principal {
	out := audit.Principal{Client: c.Client}
	switch who.Kind {
	case identity.KindSubject:
		out.Kind, out.Issuer, out.Subject = "subject", who.Issuer, who.Subject
	case identity.KindClient:
		out.Kind, out.Client = "client", who.Name
	case identity.KindAddress:
		out.Kind, out.Subject = "address", who.Name
	default:
		out.Kind = "local"
	}
	return out
}

// traceID is the trace id of a W3C traceparent header ("" without one).
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) < 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// isToolError reports whether a tools/call result says isError.
func isToolError(result json.RawMessage) bool {
	if len(result) == 0 || (!bytes.Contains(result, []byte(`"isError"`)) && !bytes.Contains(result, []byte(`\u`))) {
		return false // most results: no decoding on the call path (a key may be written escaped)
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}
