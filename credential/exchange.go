package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// The token exchange of RFC 8693.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
	// grantClientCredentials is RFC 6749 §4.4: the aggregator's own token.
	grantClientCredentials = "client_credentials"
)

// Bounds of a token exchange.
const (
	exchangeTimeout   = 15 * time.Second // one exchange, or one metadata fetch
	maxExchangeBody   = 64 << 10         // an answer of the token endpoint or the metadata
	maxCachedTokens   = 10000            // exchanged tokens kept, over all callers
	defaultTokenLife  = 5 * time.Minute  // for an answer without expires_in
	maxRenewAhead     = time.Minute      // renew at most this long before expiry
	firstRetry        = time.Second      // after the first failure
	maxRetry          = 5 * time.Minute  // the longest wait between failed attempts
	maxErrDescription = 200              // of an error_description quoted in an error
)

// ExchangeOptions configure an Exchanger.
type ExchangeOptions struct {
	// Server names the upstream in logs and errors.
	Server string
	// TokenEndpoint is where tokens are exchanged; when "", the token
	// endpoint the Issuer's metadata names.
	TokenEndpoint string
	// Issuer is the authorization server whose metadata (RFC 8414, then
	// OpenID discovery) names the token endpoint.
	Issuer string
	// ClientID and ClientSecret authenticate the aggregator at the token
	// endpoint (HTTP Basic; a public client sends client_id alone).
	ClientID     string
	ClientSecret identity.Secret
	// Audience is what the exchanged token is for (the upstream).
	Audience string
	// Scopes asked for; none: what the issuer grants by default.
	Scopes []string
	// HTTPClient makes the exchanges; nil: one that follows no redirect,
	// each request bounded by 15 s.
	HTTPClient *http.Client
	// Logger receives failed exchanges (never a token); nil discards.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Scrub, when set, is given each exchanged token and its expiry, so
	// that an upstream echoing it in an error does not put it in a log.
	Scrub func(token string, until time.Time)
	// Service, when set, has ServiceToken get the aggregator's own token
	// (the client credentials grant of ClientID, for Audience and Scopes)
	// for the requests no caller made; when false, those go without one.
	Service bool
	// Exchanged, when set, hears each exchange made, not a token served
	// from the cache: whose it was, how long it took, and its error or nil
	// (which never holds a token). The audit log's hook.
	Exchanged func(c identity.Caller, took time.Duration, err error)
}

// Exchanger trades each caller's access token for one meant for an
// upstream (RFC 8693), and keeps what it got per principal (an OAuth
// user's issuer and subject) until shortly before it expires. One exchange at a
// time runs for a key, the callers that need it meanwhile wait for its
// outcome; after a failure the next attempt for that key waits, 1 s and
// twice as long after each further failure up to 5 minutes, and calls
// meanwhile fail at once with the failure. It is safe for concurrent use.
type Exchanger struct {
	opts      ExchangeOptions
	exchanges atomic.Int64

	endpointMu sync.Mutex
	endpoint   string // discovered from the issuer; guarded by endpointMu

	mu     sync.Mutex
	tokens map[identity.Principal]*exchanged
}

// exchanged is the state of one key; guarded by Exchanger.mu.
type exchanged struct {
	token    identity.Secret
	expires  time.Time // zero: no token
	renew    time.Time // exchange again from then on
	running  chan struct{}
	err      error // the last failure, until retryAt
	retryAt  time.Time
	failures int
}

// NewExchanger returns an Exchanger for opts.
func NewExchanger(opts ExchangeOptions) *Exchanger {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: exchangeTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Exchanger{opts: opts, endpoint: opts.TokenEndpoint, tokens: map[identity.Principal]*exchanged{}}
}

// Exchanges counts the exchanges made so far, failed ones included.
func (e *Exchanger) Exchanges() int64 { return e.exchanges.Load() }

// Token returns the upstream's token for c: the one kept, or a new one
// exchanged for c's access token. Its error never holds a token.
func (e *Exchanger) Token(ctx context.Context, c identity.Caller) (identity.Secret, error) {
	if c.Token.IsZero() {
		return identity.Secret{}, errors.New("the caller has no OAuth access token to exchange; authenticate to the gateway with http.auth.oauth")
	}
	return e.token(ctx, c)
}

// Serves reports whether the Exchanger gets a token of the aggregator's own
// (ExchangeOptions.Service) for the requests no caller made.
func (e *Exchanger) Serves() bool { return e.opts.Service }

// ServiceToken returns the aggregator's own token for the upstream, for a
// request no caller made: the one kept, or a new one by the client
// credentials grant, kept, renewed and retried after a failure as the
// callers' tokens are. Its error never holds a token.
func (e *Exchanger) ServiceToken(ctx context.Context) (identity.Secret, error) {
	if !e.opts.Service {
		return identity.Secret{}, errors.New("no service credential is configured (auth.service)")
	}
	return e.token(ctx, identity.Caller{})
}

// token is the token of c, or with the zero Caller the aggregator's own,
// kept under c's principal (the zero Principal for the aggregator's own,
// which no caller has).
func (e *Exchanger) token(ctx context.Context, c identity.Caller) (identity.Secret, error) {
	key := c.Principal
	for {
		e.mu.Lock()
		x := e.entry(key)
		now := e.opts.Now()
		switch {
		case !x.expires.IsZero() && now.Before(x.renew):
			tok := x.token
			e.mu.Unlock()
			return tok, nil
		case x.running != nil:
			wait := x.running
			e.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return identity.Secret{}, context.Cause(ctx)
			}
		case now.Before(x.retryAt):
			tok, expires, err, at := x.token, x.expires, x.err, x.retryAt
			e.mu.Unlock()
			if now.Before(expires) {
				return tok, nil // still valid: use it while the issuer fails
			}
			return identity.Secret{}, fmt.Errorf("%w (next attempt in %s)", err, at.Sub(now).Round(time.Second))
		}
		x.running = make(chan struct{})
		e.mu.Unlock()

		start := time.Now()
		tok, life, err := e.exchange(ctx, c)
		if e.opts.Exchanged != nil && !key.IsZero() {
			e.opts.Exchanged(c, time.Since(start), err)
		}

		e.mu.Lock()
		now = e.opts.Now()
		if err == nil {
			x.token, x.expires = tok, now.Add(life)
			if exp := expiryOf(c); !exp.IsZero() && exp.Before(x.expires) {
				// Never longer than the caller's own token: a caller whose
				// token expired exchanges again, and is refused then.
				x.expires = exp
			}
			ahead := min(x.expires.Sub(now)/5, maxRenewAhead)
			x.renew = x.expires.Add(-ahead)
			x.err, x.retryAt, x.failures = nil, time.Time{}, 0
			if e.opts.Scrub != nil {
				e.opts.Scrub(tok.Reveal(), x.expires)
			}
		} else {
			x.failures++
			wait := min(firstRetry<<min(x.failures-1, 20), maxRetry)
			x.err, x.retryAt = err, now.Add(wait)
			if key.IsZero() {
				e.opts.Logger.Warn("could not get the aggregator's own token for the server's requests no caller made; trying again later",
					"server", e.opts.Server, "err", err, "retry_in", wait)
			} else {
				e.opts.Logger.Warn("could not exchange a caller's token for the server's; trying again later", "server", e.opts.Server,
					"principal", c.Principal, "err", err, "retry_in", wait)
			}
		}
		close(x.running)
		x.running = nil
		e.mu.Unlock()
		if err != nil {
			return identity.Secret{}, err
		}
		return tok, nil
	}
}

// Forget drops the token kept for c when it is still stale, after the
// upstream refused it: the next call exchanges again.
func (e *Exchanger) Forget(c identity.Caller, stale identity.Secret) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.tokens[c.Principal]; x != nil && x.token == stale && x.running == nil {
		x.token, x.expires, x.renew = identity.Secret{}, time.Time{}, time.Time{}
	}
}

// entry returns key's state, made room for when the cache is full:
// entries without a usable token go first, then any that is not
// exchanging. Called with mu held.
func (e *Exchanger) entry(key identity.Principal) *exchanged {
	if x := e.tokens[key]; x != nil {
		return x
	}
	if len(e.tokens) >= maxCachedTokens {
		now := e.opts.Now()
		for k, x := range e.tokens {
			if x.running == nil && !now.Before(x.expires) && !now.Before(x.retryAt) {
				delete(e.tokens, k)
			}
		}
		for k, x := range e.tokens {
			if len(e.tokens) < maxCachedTokens {
				break
			}
			if x.running == nil {
				delete(e.tokens, k)
			}
		}
	}
	x := &exchanged{}
	e.tokens[key] = x
	return x
}

// expiryOf is the exp of c's access token, zero when it has none.
func expiryOf(c identity.Caller) time.Time {
	if exp, ok := c.Claims["exp"].(float64); ok && exp > 0 {
		return time.Unix(int64(exp), 0)
	}
	return time.Time{}
}

// tokenAnswer is the token endpoint's answer (RFC 8693 §2.2).
type tokenAnswer struct {
	AccessToken      string          `json:"access_token"`
	TokenType        string          `json:"token_type"`
	IssuedTokenType  string          `json:"issued_token_type"`
	ExpiresIn        json.Number     `json:"expires_in"`
	Error            string          `json:"error"`
	ErrorDescription string          `json:"error_description"`
	Scope            json.RawMessage `json:"scope"`
}

// exchange makes one exchange, bounded by its own timeout: a caller that
// gives up does not fail the exchange the others wait for. For the zero
// Caller it asks for the aggregator's own token instead (client
// credentials), and its errors say so.
func (e *Exchanger) exchange(ctx context.Context, c identity.Caller) (identity.Secret, time.Duration, error) {
	e.exchanges.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exchangeTimeout)
	defer cancel()
	endpoint, err := e.tokenEndpoint(ctx)
	if err != nil {
		return identity.Secret{}, 0, err
	}
	form := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {c.Token.Reveal()},
		"subject_token_type":   {tokenTypeAccess},
		"requested_token_type": {tokenTypeAccess},
	}
	what := "token exchange"
	if c.Principal.IsZero() {
		what = "client credentials grant"
		form = url.Values{"grant_type": {grantClientCredentials}}
		if u, err := url.Parse(e.opts.Audience); err == nil && u.IsAbs() && u.Fragment == "" {
			form.Set("resource", e.opts.Audience) // RFC 8707
		}
	}
	if e.opts.Audience != "" {
		form.Set("audience", e.opts.Audience)
	}
	if len(e.opts.Scopes) > 0 {
		form.Set("scope", strings.Join(e.opts.Scopes, " "))
	}
	if e.opts.ClientSecret.IsZero() {
		form.Set("client_id", e.opts.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return identity.Secret{}, 0, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if !e.opts.ClientSecret.IsZero() {
		// RFC 6749 §2.3.1: both form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(e.opts.ClientID), url.QueryEscape(e.opts.ClientSecret.Reveal()))
	}
	resp, err := e.opts.HTTPClient.Do(req)
	if err != nil {
		return identity.Secret{}, 0, fmt.Errorf("%s at %s: %w", what, endpoint, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxExchangeBody+1))
	if err != nil {
		return identity.Secret{}, 0, fmt.Errorf("%s at %s: reading the answer: %w", what, endpoint, err)
	}
	if len(body) > maxExchangeBody {
		return identity.Secret{}, 0, fmt.Errorf("%s at %s: the answer is over %d bytes", what, endpoint, maxExchangeBody)
	}
	var a tokenAnswer
	decodeErr := json.Unmarshal(body, &a)
	if resp.StatusCode != http.StatusOK {
		if decodeErr == nil && a.Error != "" {
			return identity.Secret{}, 0, fmt.Errorf("%s at %s refused (HTTP %d): %s%s", what, endpoint, resp.StatusCode,
				printable(a.Error, 64), describeError(a.ErrorDescription, c.Token.Reveal(), e.opts.ClientSecret.Reveal()))
		}
		return identity.Secret{}, 0, fmt.Errorf("%s at %s failed: HTTP %d", what, endpoint, resp.StatusCode)
	}
	if decodeErr != nil || a.AccessToken == "" {
		return identity.Secret{}, 0, fmt.Errorf("%s at %s: the answer holds no access_token", what, endpoint)
	}
	if !strings.EqualFold(a.TokenType, "Bearer") {
		return identity.Secret{}, 0, fmt.Errorf("%s at %s: the token is of type %q, not Bearer", what, endpoint, printable(a.TokenType, 32))
	}
	if a.IssuedTokenType != "" && a.IssuedTokenType != tokenTypeAccess {
		return identity.Secret{}, 0, fmt.Errorf("%s at %s: issued a %q, not an access token", what, endpoint, printable(a.IssuedTokenType, 80))
	}
	life := defaultTokenLife
	if n, err := a.ExpiresIn.Int64(); err == nil && n > 0 {
		life = time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second
	}
	return identity.NewSecret(a.AccessToken), life, nil
}

// describeError quotes an error_description, cut short, printable, with
// any credential the request carried removed (some servers echo them).
func describeError(d string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			d = strings.ReplaceAll(d, s, identity.NewSecret(s).String())
		}
	}
	if d = printable(d, maxErrDescription); d == "" {
		return ""
	}
	return ": " + d
}

// printable is s without control characters, at most n bytes.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// unwrapURLError drops the *url.Error around err, which repeats the URL.
func unwrapURLError(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}
