// Package credential carries each caller's own credentials to the upstream
// servers a request reaches: what the gateway learned of the caller from
// its access token (a Caller on the request's context, its token a Secret
// that never prints), and the HTTP transports that send a server the
// caller's values in its per-principal headers.
package credential
