// Package identity says who is calling the aggregator. A Principal is set by
// the downstream transports on every request and session, and read by the
// proxy to keep one caller's leases, and the requests a shared upstream
// sends back, apart from another's. A Caller is a principal with what its
// credentials said beside it (client, claims, and the verified access
// token as a Secret, which never prints); the gateway puts it on each
// request's context (WithCaller), where the transports and the upstream
// credential code read it (CallerOf).
package identity
