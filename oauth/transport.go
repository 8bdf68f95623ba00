package oauth

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

// bearer is the HTTP transport of one server that needs OAuth. Requests to
// the server's origin carry its access token; a 401 is answered by one
// refresh and one retry. Requests to any other origin (a redirect; an SSE
// endpoint elsewhere is refused before any request) carry no Authorization
// header at all: the token is for that server alone.
type bearer struct {
	cred   *credential
	server *config.Server
	origin string
	base   http.RoundTripper
}

// maxDrain bounds what is read of a refused response before it is dropped.
const maxDrain = 64 << 10

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if o, _ := originOf(req.URL.String()); o != b.origin {
		out := req.Clone(req.Context())
		out.Header.Del("Authorization")
		return b.base.RoundTrip(out)
	}
	token, err := b.cred.token(req.Context(), b.server, "")
	if err != nil && req.Method == http.MethodGet && errors.Is(err, ErrLoginRequired) {
		// The stream that waits for the server's own messages is opened
		// again every second when it fails: hold it until a new login
		// instead, rather than fail (and log) it over and over.
		if werr := b.cred.waitRenewed(req.Context()); werr != nil {
			return nil, werr
		}
		token, err = b.cred.token(req.Context(), b.server, "")
	}
	if err != nil {
		return nil, err
	}
	resp, err := b.base.RoundTrip(withToken(req, req.Body, token))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	// The server no longer takes the token (revoked, or expired early):
	// refresh once and send the request again, if its body can be sent again.
	if req.Body != nil && req.GetBody == nil {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	fresh, err := b.cred.token(req.Context(), b.server, token)
	if err != nil {
		return nil, err
	}
	body := req.Body
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, err = b.base.RoundTrip(withToken(req, body, fresh))
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		resp.Body.Close()
		b.cred.rejected(fresh)
		return nil, &LoginRequiredError{Server: b.server.ID, Reason: "the server refused a freshly refreshed access token"}
	}
	return resp, err
}

// withToken is req with body and the bearer token; req is not changed, as
// a RoundTripper must not.
func withToken(req *http.Request, body io.ReadCloser, token string) *http.Request {
	out := req.Clone(req.Context())
	out.Body = body
	out.Header.Set("Authorization", "Bearer "+token)
	return out
}

// originOf is a URL's scheme and host, lower case, with the default port
// spelled out, so that two spellings of one origin compare equal.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("not an absolute URL")
	}
	return sameorigin.Origin(u), nil
}
