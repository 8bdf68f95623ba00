// Package credential carries each caller's own credentials to the upstream
// servers a request reaches: from the identity.Caller on the request's
// context (its access token an identity.Secret, which never prints), the
// HTTP transports that send a server the caller's values in its
// per-principal headers or a token exchanged for theirs (RFC 8693, kept
// per principal), and the vault that keeps each principal's per-user
// logins sealed.
package credential
