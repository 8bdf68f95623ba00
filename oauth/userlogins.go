package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	cred "github.com/mcp-aggregator/mcp-aggregator/credential"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// UserLoginsOptions configure UserLogins.
type UserLoginsOptions struct {
	// Vault keeps each caller's grant, sealed.
	Vault *cred.Vault
	// Redirects is the gateway's callback the logins come back to.
	Redirects *Redirects
	// Logger receives refresh failures (never a token); nil discards.
	Logger *slog.Logger
	// Secrets, when set, is given every token loaded or obtained, so that
	// logs are scrubbed of it.
	Secrets func(values ...string)
	// HTTPClient makes the logins' and refreshes' requests; nil: one with
	// a 30 s timeout per request.
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxUnused is how long a stored login no call uses is kept (Sweep);
	// 0 keeps it.
	MaxUnused time.Duration
	// Refreshes are the refreshes Close ends, shared with the process's
	// other logins; nil: its own.
	Refreshes *Refreshes
}

// touchEvery is how often a login in use is noted as used in the vault:
// often enough for MaxUnused, which is days, rarely enough to cost nothing.
const touchEvery = time.Hour

// UserLogins are the logins of servers with auth: {type: oauth, per_user:
// true}: each caller logs in through the gateway's callback, their grant is
// kept sealed in the vault under who they are (credential.VaultEntry), and
// the server is sent, for each request, the token of the caller it is made
// for. It is safe for concurrent use.
type UserLogins struct {
	opts   UserLoginsOptions
	mu     sync.Mutex
	grants map[cred.VaultEntry]*Grant // loaded or obtained; guarded by mu
	// touched is when each held entry was last noted as used (Vault.Touch);
	// guarded by mu.
	touched map[cred.VaultEntry]time.Time
	// refreshMu makes refreshes one at a time: a caller's concurrent
	// calls share one.
	refreshMu sync.Mutex
}

// NewUserLogins returns the per-user logins of opts.
func NewUserLogins(opts UserLoginsOptions) *UserLogins {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Refreshes == nil {
		opts.Refreshes = NewRefreshes()
	}
	return &UserLogins{opts: opts, grants: map[cred.VaultEntry]*Grant{}, touched: map[cred.VaultEntry]time.Time{}}
}

// Close ends the refreshes of its Refreshes (Refreshes.Close) before the
// process exits, as Keyring.Close does: one of a caller's login already
// sent has what it got stored in the vault before Close returns, or ctx
// ends, which it logs.
func (u *UserLogins) Close(ctx context.Context) error {
	err := u.opts.Refreshes.Close(ctx)
	if err != nil {
		u.opts.Logger.Warn("exiting before a refresh of a caller's OAuth tokens ended; if the authorization server rotated the refresh token meanwhile, the caller logs in again", "err", err)
	}
	return err
}

// Logout ends caller's login to srv: the grant is forgotten, held and
// stored, and then revoked at its authorization server (RFC 7009) where
// that offers revocation. stored reports whether there was a login; err
// is a revocation that failed (the login is gone from here all the same)
// and never holds a token.
func (u *UserLogins) Logout(ctx context.Context, srv *config.Server, caller identity.Caller) (stored bool, err error) {
	e := cred.EntryOf(srv.ID, caller)
	g, lerr := u.load(e)
	if errors.Is(lerr, cred.ErrNotStored) {
		return false, nil
	}
	u.forget(e)
	if lerr != nil {
		return true, nil // unreadable: nothing to revoke
	}
	if err := Revoke(ctx, u.opts.HTTPClient, g); err != nil && !errors.Is(err, ErrNoRevocation) {
		return true, err
	}
	return true, nil
}

// Sweep removes the logins no longer worth keeping: those held whose access
// token expired with no refresh token to renew it, and those stored that
// no call used for MaxUnused. It reports how many went.
func (u *UserLogins) Sweep() (int, error) {
	now := u.opts.Now()
	var dead []cred.VaultEntry
	u.mu.Lock()
	for e, g := range u.grants {
		if g.RefreshToken == "" && expired(g, now) {
			dead = append(dead, e)
		}
	}
	u.mu.Unlock()
	for _, e := range dead {
		u.forget(e)
	}
	n := len(dead)
	if u.opts.MaxUnused <= 0 {
		return n, nil
	}
	swept, err := u.opts.Vault.Sweep(now.Add(-u.opts.MaxUnused))
	n += swept
	if swept > 0 {
		// What the vault no longer holds is not held here either: the
		// next call of its caller reads the vault, and logs in again.
		u.mu.Lock()
		for e, at := range u.touched {
			if now.Sub(at) >= u.opts.MaxUnused {
				delete(u.grants, e)
				delete(u.touched, e)
			}
		}
		u.mu.Unlock()
	}
	return n, err
}

// used notes that e's login served a call: in the vault, at most every
// touchEvery, so that Sweep keeps it.
func (u *UserLogins) used(e cred.VaultEntry) {
	now := u.opts.Now()
	u.mu.Lock()
	last, ok := u.touched[e]
	if ok && now.Sub(last) < touchEvery {
		u.mu.Unlock()
		return
	}
	u.touched[e] = now
	u.mu.Unlock()
	if err := u.opts.Vault.Touch(e); err != nil {
		u.opts.Logger.Warn("could not note a per-user login as used", "server", e.Server, "err", err)
	}
}

// Login runs the login of srv for caller, through the gateway's callback,
// and keeps the grant it gets; authorize is given the authorization URL.
// It returns once the browser came back (or ctx, or the login's time
// limit, ended it).
func (u *UserLogins) Login(ctx context.Context, srv *config.Server, caller identity.Caller, authorize func(url string)) error {
	if !caller.Principal.Authenticated() {
		return errors.New("a per-user login needs an authenticated caller")
	}
	g, err := Login(ctx, LoginOptions{Server: srv, Authorize: authorize, Redirects: u.opts.Redirects, HTTPClient: u.opts.HTTPClient})
	if err != nil {
		return err
	}
	return u.keep(cred.EntryOf(srv.ID, caller), g)
}

// keep stores g as the entry's grant, sealed, and holds it.
func (u *UserLogins) keep(e cred.VaultEntry, g *Grant) error {
	data, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if u.opts.Secrets != nil {
		u.opts.Secrets(g.secrets()...)
	}
	if err := u.opts.Vault.Put(e, data); err != nil {
		return fmt.Errorf("storing the login: %w", err)
	}
	u.mu.Lock()
	u.grants[e] = g
	u.touched[e] = u.opts.Now()
	u.mu.Unlock()
	return nil
}

// forget drops the entry's grant, held and stored.
func (u *UserLogins) forget(e cred.VaultEntry) {
	u.mu.Lock()
	delete(u.grants, e)
	delete(u.touched, e)
	u.mu.Unlock()
	if err := u.opts.Vault.Delete(e); err != nil {
		u.opts.Logger.Warn("could not delete a stored per-user login", "server", e.Server, "err", err)
	}
}

// token returns the access token of caller for srv: held, or read from the
// vault, refreshed when it is due. A caller without a usable login gets a
// LoginRequiredError.
func (u *UserLogins) token(ctx context.Context, srv *config.Server, caller identity.Caller) (string, error) {
	e := cred.EntryOf(srv.ID, caller)
	need := func(reason string) error { return &LoginRequiredError{Server: srv.ID, Reason: reason, PerUser: true} }
	g, err := u.load(e)
	switch {
	case errors.Is(err, cred.ErrNotStored):
		return "", need("you have not logged in to it yet")
	case err != nil:
		return "", need(err.Error())
	case g.Server != srv.URL:
		return "", need("your login was made for another url of the server")
	}
	u.used(e)
	if !due(g, u.opts.Now()) {
		return g.AccessToken, nil
	}
	if !u.opts.Refreshes.start() {
		if !expired(g, u.opts.Now()) {
			return g.AccessToken, nil
		}
		return "", fmt.Errorf("server %q: %w", srv.ID, errClosed)
	}
	// The refresh runs on a goroutine and a context of its own: a caller
	// that gives up (or a shutdown) must not leave the refresh token spent
	// at the issuer and its successor lost.
	type renewed struct {
		token string
		err   error
	}
	done := make(chan renewed, 1)
	go func() {
		defer u.opts.Refreshes.done()
		token, err := u.renew(e, g, srv, caller, need)
		done <- renewed{token, err}
	}()
	select {
	case r := <-done:
		return r.token, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// renew refreshes g, the entry's grant, one refresh at a time, and stores
// what it gets; it returns the access token to send.
func (u *UserLogins) renew(e cred.VaultEntry, g *Grant, srv *config.Server, caller identity.Caller, need func(string) error) (string, error) {
	u.refreshMu.Lock()
	defer u.refreshMu.Unlock()
	if held, err := u.load(e); err == nil {
		if !due(held, u.opts.Now()) {
			return held.AccessToken, nil // refreshed while this call waited
		}
		// Refreshed, or logged in again, while this call waited, and due
		// already: the stored grant holds the refresh token the issuer
		// takes now (g's may have been rotated away).
		g = held
	}
	if g.RefreshToken == "" {
		if expired(g, u.opts.Now()) {
			return "", need("your login expired")
		}
		return g.AccessToken, nil
	}
	if u.opts.Refreshes.closed() { // not sent: the refresh token stays good
		if !expired(g, u.opts.Now()) {
			return g.AccessToken, nil
		}
		return "", fmt.Errorf("server %q: %w", srv.ID, errClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), RefreshTimeout)
	defer cancel()
	next, err := refresh(ctx, u.opts.HTTPClient, g, u.opts.Now())
	var refused *refusedError
	switch {
	case errors.As(err, &refused):
		u.forget(e)
		return "", need("the authorization server refused to renew your login")
	case err != nil:
		u.opts.Logger.Warn("could not refresh a caller's OAuth tokens", "server", srv.ID, "principal", caller.Principal, "err", err)
		if !expired(g, u.opts.Now()) {
			return g.AccessToken, nil
		}
		return "", fmt.Errorf("server %q: renewing your login: %w", srv.ID, err)
	}
	if err := u.keep(e, next); err != nil {
		return "", err
	}
	return next.AccessToken, nil
}

// load is the entry's grant: held, else read from the vault.
func (u *UserLogins) load(e cred.VaultEntry) (*Grant, error) {
	u.mu.Lock()
	g := u.grants[e]
	u.mu.Unlock()
	if g != nil {
		return g, nil
	}
	data, err := u.opts.Vault.Get(e)
	if err != nil {
		return nil, err
	}
	if g, err = decodeGrant(data); err != nil {
		return nil, fmt.Errorf("your stored login is unusable (%v)", err)
	}
	if u.opts.Secrets != nil {
		u.opts.Secrets(g.secrets()...)
	}
	u.mu.Lock()
	u.grants[e] = g
	u.mu.Unlock()
	return g, nil
}

// due reports whether g's access token should be renewed before use at now:
// past or within a fifth of its lifetime of its expiry (at most a minute,
// at least a second, but never more than half of it).
func due(g *Grant, now time.Time) bool {
	if g.Expiry.IsZero() {
		return false
	}
	margin := 30 * time.Second
	if !g.Obtained.IsZero() && g.Expiry.After(g.Obtained) {
		life := g.Expiry.Sub(g.Obtained)
		margin = min(max(life/5, time.Second), time.Minute, life/2)
	}
	return !now.Add(margin).Before(g.Expiry)
}

// Transport returns the HTTP transport of a per-user server: each request
// to its origin carries the token of the request's caller; a request no
// caller made goes without one; a caller without a login fails with a
// LoginRequiredError (the gateway then offers the login); a token the
// server refuses is dropped, and the caller is asked to log in again.
func (u *UserLogins) Transport(srv *config.Server, base http.RoundTripper) (http.RoundTripper, error) {
	origin, err := originOf(srv.URL)
	if err != nil {
		return nil, fmt.Errorf("server %q: url: %w", srv.ID, err)
	}
	return &userBearer{u: u, srv: srv, origin: origin, base: base}, nil
}

type userBearer struct {
	u      *UserLogins
	srv    *config.Server
	origin string
	base   http.RoundTripper
}

func (b *userBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	caller := identity.CallerOf(req.Context())
	if o, _ := originOf(req.URL.String()); o != b.origin || !caller.Principal.Authenticated() {
		out := req.Clone(req.Context())
		out.Header.Del("Authorization")
		return b.base.RoundTrip(out)
	}
	token, err := b.u.token(req.Context(), b.srv, caller)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := b.base.RoundTrip(withToken(req, req.Body, token))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	b.u.forget(cred.EntryOf(b.srv.ID, caller))
	return nil, &LoginRequiredError{Server: b.srv.ID, Reason: "the server refused your access token", PerUser: true}
}
