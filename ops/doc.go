// Package ops is what an operator of the HTTP gateway looks at: the
// liveness and readiness probes, the Prometheus metrics and the status page
// (HTML for a person, JSON for a script). It records what the proxy reports
// as it works (calls, reloads, instance restarts) and reads everything else
// from the proxy's published state when asked, so the call path pays for a
// few atomic additions and nothing more.
package ops
