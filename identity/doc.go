// Package identity says who is calling the aggregator. A Principal is set by
// the downstream transports on every request and session, and read by the
// proxy to keep one caller's leases, and the requests a shared upstream
// sends back, apart from another's.
package identity
