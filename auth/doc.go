// Package auth decides who is calling the HTTP gateway: a client holding
// one of the static bearer tokens of http.auth.tokens, or one presenting a
// JWT access token of the configured OAuth authorization server (the
// gateway is then an OAuth 2.1 resource server and publishes its RFC 9728
// metadata). It answers with the client's name, or with the refusal the
// client is owed (401 or 403 and its WWW-Authenticate challenge).
package auth
