// Package requeststate issues and checks the requestState tokens the
// aggregator hands to protocol 2026-07-28 clients when it holds an upstream
// request open on their behalf. A token is opaque to the client,
// authenticated with HMAC-SHA256 under a key that lives only in this
// process, and carries what the aggregator checks when the token comes
// back: which held exchange and round it belongs to, the caller and
// request it is bound to, and when it expires.
package requeststate
