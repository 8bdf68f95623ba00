package proxy

import (
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// InstanceStatus is one upstream instance as mcp_status lists it: every
// instance of every server, whoever it serves, so that none goes
// unaccounted for.
type InstanceStatus struct {
	Server string `json:"serverId"`
	PID    int    `json:"pid,omitempty"` // 0 for remote instances
	Role   string `json:"role"`          // shared | leased | spare | draining
	// Session names the session a leased instance serves by a digest,
	// never by its id, which over HTTP is the session's credential.
	Session   string `json:"session,omitempty"`
	Yours     bool   `json:"yours,omitempty"` // leased to the session asking
	Age       string `json:"age"`
	Calls     int64  `json:"calls"`
	InFlight  int    `json:"inFlight"`
	RSS       int64  `json:"rssBytes"`            // resident memory of all its processes (Linux)
	Processes int    `json:"processes,omitempty"` // the server and what it started (Linux)
	Restarts  int    `json:"restarts"`

	lease session.Key // the lease key a leased instance serves; the zero Key for none
}

// instanceStatus lists every instance the ledger knows, for the session key.
func (p *Proxy) instanceStatus(key session.Key) []InstanceStatus {
	list := p.ledger.Instances()
	out := make([]InstanceStatus, 0, len(list))
	for _, in := range list {
		is := InstanceStatus{Server: in.Server, PID: in.PID, Role: in.Role, Age: time.Since(in.Started).Round(100 * time.Millisecond).String(),
			Calls: in.Calls, InFlight: in.InFlight, RSS: in.Usage.RSS, Processes: in.Usage.Processes, Restarts: in.Restarts}
		if !in.Session.IsZero() {
			is.Session, is.Yours, is.lease = sessionDigest(in.Session), in.Session == key, in.Session
		}
		out = append(out, is)
	}
	return out
}

// sessionDigest names a lease key without revealing it: a downstream
// session's key by the session's digest, the one the transport's own log
// lines show, and any other key (a sessionless conversation's, the
// anonymous one) by a digest of the whole key.
func sessionDigest(key session.Key) string {
	if id, ok := key.SessionID(); ok {
		return downstream.SessionDigest(id)
	}
	return downstream.SessionDigest(key.String())
}
