package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Written by hand rather than with golang.org/x/oauth2's token source: that
// one sends no extra parameters on a refresh, and the MCP authorization spec
// requires the RFC 8707 resource parameter on every token request. It also
// lets a refusal (the grant is gone: log in again) be told apart from a
// network failure (try again later).

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 1 << 20

// refusedError is a token endpoint's refusal of a refresh token: only a new
// login helps.
type refusedError struct {
	code string // the OAuth error code, e.g. invalid_grant
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the authorization server refused the stored refresh token (%s)", e.code)
}

// tokenResponse is RFC 6749 §5.1's successful answer.
type tokenResponse struct {
	AccessToken  string          `json:"access_token"`
	TokenType    string          `json:"token_type"`
	RefreshToken string          `json:"refresh_token"`
	ExpiresIn    json.RawMessage `json:"expires_in"`
	Scope        string          `json:"scope"`
	Error        string          `json:"error"`
}

// refresh exchanges g's refresh token for new tokens and returns the grant
// that holds them; g is not changed.
func refresh(ctx context.Context, client *http.Client, g *Grant, now time.Time) (*Grant, error) {
	if g.RefreshToken == "" {
		return nil, &refusedError{code: "no refresh token was issued"}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken}}
	// A grant stored before resources were canonical may name the server
	// with its credentials; they do not go to the authorization server.
	if resource := canonicalResource(g.Resource); resource != "" {
		form.Set("resource", resource)
	}
	req, err := clientPost(ctx, g.TokenURL, form, g)
	if err != nil {
		return nil, fmt.Errorf("refresh: token endpoint: %w", err)
	}
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		return nil, fmt.Errorf("refresh: %w", plainErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return nil, fmt.Errorf("refresh: reading the token endpoint's answer: %w", err)
	}
	if len(body) > maxTokenResponse {
		return nil, fmt.Errorf("refresh: the token endpoint's answer is over %d bytes", maxTokenResponse)
	}
	tr, err := parseTokenResponse(resp.StatusCode, resp.Header.Get("Content-Type"), body)
	if err != nil {
		var refused *refusedError
		if after := parseRetryAfter(resp.Header.Get("Retry-After"), now); after > 0 && !errors.As(err, &refused) {
			err = &retryAfterError{err: err, after: after}
		}
		return nil, err
	}
	next := *g
	next.AccessToken, next.TokenType, next.Obtained = tr.AccessToken, tr.TokenType, now
	if tr.RefreshToken != "" {
		next.RefreshToken = tr.RefreshToken // rotated
	}
	if tr.Scope != "" {
		next.Scopes = strings.Fields(tr.Scope)
	}
	next.Expiry = time.Time{}
	if secs := expiresIn(tr.ExpiresIn); secs > 0 {
		next.Expiry = now.Add(time.Duration(secs) * time.Second)
	}
	return &next, nil
}

// noRedirects is client answering a redirect with the redirect itself: a
// request whose body holds a token or the client's secret is never sent on
// (a 307 or 308 would repeat the body) to wherever the endpoint points.
func noRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// parseTokenResponse reads a token endpoint's answer: the tokens, a refusal
// (*refusedError for the errors that mean the grant is gone), or another
// failure. Nothing of the body reaches an error text but the error code,
// which RFC 6749 limits to printable ASCII.
func parseTokenResponse(status int, contentType string, body []byte) (*tokenResponse, error) {
	var tr tokenResponse
	mediaType, _, _ := mime.ParseMediaType(contentType)
	jsonErr := json.Unmarshal(body, &tr)
	if status >= 300 && status < 400 {
		return nil, fmt.Errorf("refresh: the token endpoint answered HTTP %d, a redirect, which a request carrying a refresh token does not follow; log in again so that the endpoint of the authorization server's metadata is stored", status)
	}
	if status >= 400 || tr.Error != "" {
		code := safeCode(tr.Error)
		switch {
		case code == "invalid_grant", code == "invalid_client", code == "unauthorized_client":
			return nil, &refusedError{code: code}
		case code != "":
			return nil, fmt.Errorf("refresh: the token endpoint answered HTTP %d with error %s", status, code)
		}
		return nil, fmt.Errorf("refresh: the token endpoint answered HTTP %d", status)
	}
	if jsonErr != nil {
		return nil, fmt.Errorf("refresh: the token endpoint's answer (%s) is not a JSON token response", safeCode(mediaType))
	}
	if tr.AccessToken == "" {
		return nil, errors.New("refresh: the token endpoint's answer holds no access_token")
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return nil, fmt.Errorf("refresh: the token endpoint issued a %s token; only bearer tokens are supported", safeCode(tr.TokenType))
	}
	return &tr, nil
}

// expiresIn reads expires_in, which some servers send as a string.
func expiresIn(raw json.RawMessage) int64 {
	s := strings.Trim(string(raw), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 10*365*24*3600 {
		return 0
	}
	return n
}

// safeCode keeps an error code or media type printable and short.
func safeCode(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
