package oauth

import (
	"errors"
	"net/url"
	"strings"
)

// resourceURI is the canonical URI of the MCP server at serverURL: the RFC
// 8707 resource indicator that names it to an authorization server, and
// the resource its protected resource metadata names (MCP authorization,
// "Canonical Server URI"). Scheme and host are in lower case; port and
// path stay as written. The user information, query and fragment are left
// out: a URL carries the server's credentials there (https://KEY@host,
// ?api_key=...), which are the server's alone and no part of its identity,
// and RFC 8707 allows no fragment and advises against a query.
func resourceURI(serverURL string) (*url.URL, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, errors.New("the server's url is not a URL") // the error would quote it
	}
	return &url.URL{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Host), Path: u.Path, RawPath: u.RawPath}, nil
}

// canonicalResource is resourceURI as text; "" when serverURL does not
// parse, since what it holds cannot be told from credentials.
func canonicalResource(serverURL string) string {
	u, err := resourceURI(serverURL)
	if err != nil {
		return ""
	}
	return u.String()
}
