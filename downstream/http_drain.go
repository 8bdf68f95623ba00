package downstream

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// HeaderLease is the request header a sessionless (2026-07-28) client may
// send to mirror its _meta lease key (MetaLease), so that a load balancer
// can keep the requests of one lease on one replica without reading the
// body. When sent, it must equal the key in _meta.
const HeaderLease = "Mcp-Lease"

// MetaLease is the _meta key a sessionless client sets to name the
// conversation its leases belong to.
const MetaLease = "mcp-aggregator/lease"

// sessionIDPrefix is what SessionIDPrefix may be: visible, header-safe and short.
var sessionIDPrefix = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// ValidSessionIDPrefix reports whether p may start session ids ("" may).
func ValidSessionIDPrefix(p string) bool { return p == "" || sessionIDPrefix.MatchString(p) }

// drainRetryAfter is the Retry-After of a request refused while draining:
// by then the balancer has moved new work to another replica.
const drainRetryAfter = 1 * time.Second

// Drain makes t refuse what would start new state here, so that a load
// balancer retries it on another replica: an initialize (a new session)
// and a sessionless request that names no lease, or one not held here
// (HTTPOptions.LeaseHere), get 503 with Retry-After. Existing sessions, and
// sessionless requests naming a lease held here, are served as before:
// their leases live here until the process exits. Drain cannot
// be undone; Shutdown still ends everything.
func (t *HTTP) Drain() {
	if t.draining.CompareAndSwap(false, true) {
		t.log.Info("draining: new sessions are refused; existing ones are served until shutdown")
	}
}

// Draining reports whether Drain was called.
func (t *HTTP) Draining() bool { return t.draining.Load() }

// InFlight reports how many requests are being served, not counting
// streams that only wait for notifications (a GET stream,
// subscriptions/listen).
func (t *HTTP) InFlight() int { return int(t.activity.inflight.Load()) }

// Quiet reports how long no request counted by InFlight has been in
// flight: 0 while one is, else the time since the last one ended. Unlike
// InFlight looked at now and then, it misses no call that began and ended
// between two looks.
func (t *HTTP) Quiet() time.Duration { return t.activity.quiet(time.Now()) }

// refuseDraining answers a request that would start new state here while
// draining.
func (t *HTTP) refuseDraining(p *post, what string) {
	p.w.Header().Set("Retry-After", strconv.Itoa(int(drainRetryAfter/time.Second)))
	t.refuse(p.w, p.r, (&httpError{status: http.StatusServiceUnavailable, err: jsonrpc.Errorf(jsonrpc.CodeInternalError,
		"this replica is draining and takes no %s; send it again, the load balancer routes it to another replica", what)}).withID(p.msg.ID))
}

// namesLease reports whether a sessionless request's _meta names a lease.
func namesLease(params []byte) bool {
	key, ok := stringMember(members(members(params)["_meta"]), MetaLease)
	return ok && key != ""
}

// leaseHere reports whether a sessionless request's _meta names a lease
// that lives here (HTTPOptions.LeaseHere): only such a request is served
// while draining.
func (t *HTTP) leaseHere(r *http.Request, params []byte) bool {
	name, ok := stringMember(members(members(params)["_meta"]), MetaLease)
	if !ok || name == "" {
		return false
	}
	return t.opts.LeaseHere == nil || t.opts.LeaseHere(identity.CallerOf(r.Context()).Principal, name)
}

// checkLeaseHeader checks the optional Mcp-Lease header of a sessionless
// request against its _meta lease key, as Mcp-Name is checked against the
// name: a balancer must not route one lease while the server uses another.
func checkLeaseHeader(r *http.Request, params []byte) *httpError {
	values, sent := r.Header[HeaderLease]
	if !sent {
		return nil
	}
	key, _ := stringMember(members(members(params)["_meta"]), MetaLease)
	decoded, ok := mcp.DecodeHeaderValue(values[0]) // =?base64?...?= carries what a header cannot
	if len(values) != 1 || !ok || decoded != key {
		// Neither value is echoed: a lease key may identify a conversation.
		return refusal(http.StatusBadRequest, codeHeaderMismatch,
			"the %s header does not match params._meta[%q]: send the same lease key in both, or leave the header out", HeaderLease, MetaLease)
	}
	return nil
}
