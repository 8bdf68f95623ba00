// Package upstreamauth authorizes a command's requests to the upstream
// servers that need credentials: the shared OAuth logins kept in the user's
// keyring (and watched for a login made meanwhile), the token exchanges of
// auth: token_exchange, each caller's own login of auth.per_user, and the
// logins offered to a client whose call found its server not logged in;
// which server `login` and `logout` may act on (LoginTarget), and the
// revocation and removal of a server's stored logins (Logout).
// The command wires it into the proxy and the gateway; it serves no HTTP
// of its own but the per-user logins' callback handler.
package upstreamauth
