// Package sameorigin keeps the credentials of an HTTP request (configured
// headers such as API keys, bearer tokens, cookies) with the origin they
// were meant for when a server answers with a redirect.
//
// Go's http.Client copies every header of a request onto the requests of
// its redirects; it drops Authorization and Cookie only when the host is
// neither the same nor a subdomain, and keeps them across schemes and
// ports. Custom headers (X-Api-Key and the like) it always copies.
package sameorigin
