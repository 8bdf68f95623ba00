// Package oauth authorizes the aggregator at remote upstream servers that
// require OAuth, as the MCP authorization spec describes: the login flow
// that obtains a grant, the store that keeps it in the user's config
// directory, and the HTTP transport that sends its access token, refreshed
// when it expires, to that server alone.
package oauth
