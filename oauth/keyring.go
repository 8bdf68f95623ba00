package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// RefreshTimeout bounds one refresh, from the store's lock to the new
// tokens saved: what Keyring.Close may have to wait for. A refresh runs on
// a context of its own, not the caller's: a caller that gives up must not
// leave a rotated refresh token half exchanged for the others waiting on
// it.
const RefreshTimeout = 30 * time.Second

// KeyringOptions are a Keyring's dependencies.
type KeyringOptions struct {
	Store  *Store
	Logger *slog.Logger
	// HTTPClient sends token requests; nil: a client with a 30s timeout.
	HTTPClient *http.Client
	// Secrets, when set, is given every token the keyring loads or
	// obtains, so that the logs can be scrubbed of them.
	Secrets func(values ...string)
	// Retire, when set, is given the tokens a refresh replaced and the time
	// after which they are of no use to anyone (their expiry): they need
	// not be scrubbed from the logs after that.
	Retire func(after time.Time, values ...string)
	// Discover finds the authorization server a server uses now (tests);
	// nil: DiscoverIssuer.
	Discover func(ctx context.Context, client *http.Client, srv *config.Server) (string, error)
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// Refreshes are the refreshes Close ends, shared with the process's
	// other logins; nil: the keyring's own.
	Refreshes *Refreshes
}

// Keyring holds the grants of the servers a running aggregator uses: one
// credential per server URL, shared by every instance of that server, so
// that one refresh serves them all (a rotated refresh token is good for one
// use only).
type Keyring struct {
	opts  KeyringOptions
	log   *slog.Logger
	mu    sync.Mutex
	creds map[string]*credential // by server URL
}

// NewKeyring returns a keyring over opts.Store.
func NewKeyring(opts KeyringOptions) *Keyring {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: RefreshTimeout}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Discover == nil {
		opts.Discover = DiscoverIssuer
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Refreshes == nil {
		opts.Refreshes = NewRefreshes()
	}
	return &Keyring{opts: opts, log: log, creds: map[string]*credential{}}
}

// Close ends the refreshes of the keyring's Refreshes (Refreshes.Close)
// before the process exits: none starts after it, one not yet sent is not
// sent, and Close waits until one already sent has its answer saved, or
// ctx ends, which it logs.
func (k *Keyring) Close(ctx context.Context) error {
	err := k.opts.Refreshes.Close(ctx)
	if err != nil {
		k.log.Warn("exiting before a refresh of OAuth tokens ended; if the authorization server rotated the refresh token meanwhile, the server needs a new login", "err", err)
	}
	return err
}

// credential is the grant for one server URL, as the keyring holds it: the
// one stored for the authorization server the server names now.
type credential struct {
	k       *Keyring
	url     string
	once    sync.Once    // the first load
	probe   *http.Client // reaches the server, to learn its issuer
	mu      sync.Mutex
	issuer  string // the server's authorization server, when resolved
	known   bool   // issuer was found (a discovery, or a login)
	broken  error  // non-nil: the issuer could not be found; try again later
	grant   *Grant // nil: no usable stored login
	missing string // why grant is nil
	refused string // non-empty: the issuer or the server refused the grant; log in again
	flight  *flight
	// The refreshes that failed in a row (not refused), the last one's
	// error, and when the next may be tried: see refreshBackoff.
	failures int
	failure  error
	retryAt  time.Time
	servers  map[string]*config.Server // the servers using it, by id
	renewed  chan struct{}             // closed (and replaced) when the grant is replaced
}

// flight is a refresh under way; every caller that needs it waits for it.
type flight struct {
	done  chan struct{}
	grant *Grant
	err   error
}

// Transport returns the HTTP transport for srv: base with srv's access
// token on every request to srv's origin, and nothing on requests to any
// other. It fails with a *LoginRequiredError when no usable login is
// stored for srv.
func (k *Keyring) Transport(srv *config.Server, base http.RoundTripper) (http.RoundTripper, error) {
	c := k.credential(srv, base)
	if err := c.usable(srv); err != nil {
		return nil, err
	}
	origin, err := originOf(srv.URL)
	if err != nil {
		return nil, err
	}
	return &bearer{cred: c, server: srv, origin: origin, base: base}, nil
}

// credential returns the credential for srv's URL, loading it on first use.
func (k *Keyring) credential(srv *config.Server, base http.RoundTripper) *credential {
	k.mu.Lock()
	c := k.creds[srv.URL]
	if c == nil {
		if base == nil {
			base = http.DefaultTransport
		}
		c = &credential{k: k, url: srv.URL, servers: map[string]*config.Server{}, renewed: make(chan struct{}),
			probe: &http.Client{Transport: base, Timeout: discoveryTimeout}}
		k.creds[srv.URL] = c
	}
	k.mu.Unlock()
	c.mu.Lock()
	c.servers[srv.ID] = srv
	c.mu.Unlock()
	c.once.Do(func() { c.load() })
	c.mu.Lock()
	retry := c.broken != nil
	c.mu.Unlock()
	if retry { // the server could not be asked for its issuer: ask again
		c.load()
	}
	return c
}

// load reads the stored grant for the server's issuer and reports whether
// the tokens changed. The issuer is looked up (a request to the server)
// only when some grant is stored and none is in use: a server whose
// authorization server moved gets no token of the old one, and a login
// with the new one is found.
func (c *credential) load() bool {
	grants, err := c.k.opts.Store.LoadAll(c.url)
	if err == nil && len(grants) == 0 {
		err = ErrNoGrant
	}
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.broken = nil
		return c.setLoaded(nil, err)
	}
	c.mu.Lock()
	resolve := !c.known || c.grant == nil || c.refused != ""
	c.mu.Unlock()
	if resolve {
		srv := c.anyServer()
		issuer, derr := c.k.opts.Discover(context.Background(), c.probe, srv)
		c.mu.Lock()
		if derr != nil {
			c.broken = fmt.Errorf("cannot learn which authorization server it uses: %w", derr)
			changed := c.grant != nil
			c.grant, c.missing, c.refused = nil, "", ""
			c.mu.Unlock()
			return changed
		}
		c.issuer, c.known, c.broken = issuer, true, nil
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.k.opts.Store.Load(c.url, c.issuer)
	if errors.Is(err, ErrNoGrant) {
		other := grants[0].Issuer
		err = fmt.Errorf("not logged in with its authorization server %s (the stored login is for %s)", orNone(c.issuer), orNone(other))
	}
	return c.setLoaded(g, err)
}

// anyServer is one of the servers using the credential.
func (c *credential) anyServer() *config.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out *config.Server
	for _, s := range c.servers {
		if out == nil || s.ID < out.ID {
			out = s
		}
	}
	if out == nil {
		out = &config.Server{URL: c.url}
	}
	return out
}

func orNone(issuer string) string {
	if issuer == "" {
		return "(none named)"
	}
	return issuer
}

// setLoaded takes what the store holds; callers hold c.mu. It reports
// whether the tokens changed.
func (c *credential) setLoaded(g *Grant, err error) bool {
	switch {
	case errors.Is(err, ErrNoGrant):
		changed := c.grant != nil
		c.grant, c.missing, c.refused = nil, "not logged in", ""
		return changed
	case err != nil:
		changed := c.grant != nil
		c.grant, c.missing, c.refused = nil, err.Error(), ""
		return changed
	}
	if g.sameTokens(c.grant) {
		return false
	}
	if c.k.opts.Secrets != nil {
		c.k.opts.Secrets(g.secrets()...)
	}
	c.k.retire(c.grant, g)
	c.grant, c.missing, c.refused = g, "", ""
	c.recovered()
	close(c.renewed)
	c.renewed = make(chan struct{})
	return true
}

// waitRenewed waits until the stored grant is replaced (a new login), or
// ctx ends.
func (c *credential) waitRenewed(ctx context.Context) error {
	c.mu.Lock()
	renewed := c.renewed
	c.mu.Unlock()
	select {
	case <-renewed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// usable says why srv cannot use the credential now, or nil.
func (c *credential) usable(srv *config.Server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.broken != nil:
		return fmt.Errorf("server %q: %w", srv.ID, c.broken)
	case c.grant == nil:
		return &LoginRequiredError{Server: srv.ID, Reason: c.missing}
	case c.refused != "":
		return &LoginRequiredError{Server: srv.ID, Reason: c.refused}
	case srv.Auth.ClientID != "" && c.grant.ClientID != srv.Auth.ClientID:
		return &LoginRequiredError{Server: srv.ID, Reason: "the stored login was made with another client than auth.client_id"}
	}
	return nil
}

// token returns an access token for srv that is not stale and not about to
// expire, refreshing the grant if needed; one refresh at a time, shared by
// every caller. stale is a token the server has just refused ("" if none).
func (c *credential) token(ctx context.Context, srv *config.Server, stale string) (string, error) {
	if err := c.usable(srv); err != nil {
		return "", err
	}
	c.mu.Lock()
	g := c.grant
	now := c.k.opts.Now()
	// usableToken: g's token may still be sent, although it is due for a
	// refresh; it serves while that refresh fails.
	usableToken := g.AccessToken != "" && g.AccessToken != stale && !expired(g, now)
	if usableToken && !c.k.expiring(g) {
		c.mu.Unlock()
		return g.AccessToken, nil
	}
	f := c.flight
	if f == nil && now.Before(c.retryAt) {
		// The last refresh failed a moment ago: the token endpoint is not
		// asked again before retryAt.
		err := &backoffError{err: c.failure, until: c.retryAt, now: now}
		c.mu.Unlock()
		if usableToken {
			return g.AccessToken, nil
		}
		return "", err
	}
	if f == nil {
		if !c.k.opts.Refreshes.start() {
			c.mu.Unlock()
			if usableToken {
				return g.AccessToken, nil
			}
			return "", fmt.Errorf("server %q: %w", srv.ID, errClosed)
		}
		f = &flight{done: make(chan struct{})}
		c.flight = f
		go c.refresh(f, g, stale)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if f.err != nil {
		if !errors.Is(f.err, ErrLoginRequired) {
			if usableToken && !expired(g, c.k.opts.Now()) {
				return g.AccessToken, nil
			}
			if errors.Is(f.err, errClosed) {
				return "", fmt.Errorf("server %q: %w", srv.ID, f.err)
			}
			return "", f.err
		}
		if err := c.usable(srv); err != nil {
			return "", err // names this server
		}
		// A new login replaced the refused grant while the refresh ran.
		c.mu.Lock()
		g = c.grant
		c.mu.Unlock()
		if g.AccessToken == "" || g.AccessToken == stale || c.k.expiring(g) {
			return "", &LoginRequiredError{Server: srv.ID, Reason: "the authorization server refused the stored refresh token"}
		}
		return g.AccessToken, nil
	}
	return f.grant.AccessToken, nil
}

// refresh runs one flight: it renews held (the grant the caller saw), or
// takes a newer grant from the store if another process (a login, another
// aggregator) saved one meanwhile, and saves what it gets.
func (c *credential) refresh(f *flight, held *Grant, stale string) {
	defer c.k.opts.Refreshes.done() // last: the new tokens are saved
	defer close(f.done)
	defer func() {
		c.mu.Lock()
		c.flight = nil
		c.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), RefreshTimeout)
	defer cancel()
	// Until the request is sent, the refresh gives way to Close: waiting
	// for another process's lock ends with it.
	beforeSend, stopWaiting := context.WithCancel(ctx)
	defer context.AfterFunc(c.k.opts.Refreshes.closing, stopWaiting)()
	if unlock, err := lockFile(beforeSend, c.k.opts.Store.lockPath(c.url)); err == nil {
		defer unlock()
	} else if !c.k.opts.Refreshes.closed() {
		c.k.log.Warn("refreshing OAuth tokens without the store's lock", "servers", c.ids(), "err", err)
	}
	if g, ok := c.newerOnDisk(held, stale); ok {
		f.grant = g
		return
	}
	if c.k.opts.Refreshes.closed() {
		// Not sent: the refresh token stays as it is, on disk and at the
		// issuer.
		f.err = errClosed
		return
	}
	// Sent: from here the issuer may rotate the refresh token at any
	// moment, so what it answers is saved even once Close has begun; Close
	// waits for it.
	next, err := refresh(ctx, c.k.opts.HTTPClient, held, c.k.opts.Now())
	var refused *refusedError
	if errors.As(err, &refused) {
		// Another aggregator sharing the store may have rotated the refresh
		// token first: its grant is as good as ours would have been.
		if g, ok := c.newerOnDisk(held, stale); ok {
			f.grant = g
			return
		}
		c.refuse(held, refused.Error())
		f.err = ErrLoginRequired
		return
	}
	if err != nil {
		c.failed(held, err)
		f.err = err
		return
	}
	if c.k.opts.Secrets != nil {
		c.k.opts.Secrets(next.secrets()...)
	}
	c.k.retire(held, next)
	c.mu.Lock()
	current := c.grant == held // else a new login replaced it meanwhile: keep that one, here and on disk
	if current {
		c.grant = next
		c.recovered()
	}
	c.mu.Unlock()
	if !current {
		f.grant = next
		return
	}
	if err := c.k.opts.Store.Save(next); err != nil {
		// The new tokens work in this process; the next start needs a login
		// if the rotated refresh token is lost.
		c.k.log.Warn("could not save refreshed OAuth tokens", "servers", c.ids(), "err", err)
	}
	f.grant = next
}

// newerOnDisk returns the stored grant when it differs from held and has an
// access token that is neither stale nor expiring.
func (c *credential) newerOnDisk(held *Grant, stale string) (*Grant, bool) {
	g, err := c.k.opts.Store.Load(c.url, held.Issuer)
	if err != nil || g.sameTokens(held) || g.AccessToken == "" || g.AccessToken == stale || c.k.expiring(g) {
		return nil, false
	}
	c.mu.Lock()
	c.setLoaded(g, nil)
	c.mu.Unlock()
	return g, true
}

// refuse marks the grant unusable until a new login, once, and logs it.
func (c *credential) refuse(held *Grant, reason string) {
	c.mu.Lock()
	if c.grant != held || c.refused != "" {
		c.mu.Unlock()
		return
	}
	c.refused = reason
	c.mu.Unlock()
	for _, id := range c.ids() {
		c.k.log.Error("server needs a new login", "server", id, "reason", reason, "fix", "run `mcp-aggregator login "+id+"`")
	}
	// The server may have moved to another authorization server, with
	// which a login is already stored.
	go c.load()
}

// rejected records that the server refused token even right after a
// refresh: only a new login helps.
func (c *credential) rejected(token string) {
	c.mu.Lock()
	held := c.grant
	c.mu.Unlock()
	if held != nil && held.AccessToken == token {
		c.refuse(held, "the server refused a freshly refreshed access token")
	}
}

func (c *credential) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.servers))
	for id := range c.servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// expiring reports whether g's access token expires within a fifth of its
// lifetime (at most a minute, at least a second, but never more than half
// of it): it is refreshed before a request could fail with it, and a token
// that lives a second is not due for a refresh the moment it arrives.
func (k *Keyring) expiring(g *Grant) bool {
	return due(g, k.opts.Now())
}

// expired reports whether g's access token is past its expiry at now.
func expired(g *Grant, now time.Time) bool {
	return !g.Expiry.IsZero() && !now.Before(g.Expiry)
}

// Sync re-reads the stored grant of every server the keyring knows and
// reports whether any changed: a login or logout from the command line, or
// a file put there by hand. Its own saves change nothing here.
func (k *Keyring) Sync() bool {
	k.mu.Lock()
	creds := make([]*credential, 0, len(k.creds))
	for _, c := range k.creds {
		creds = append(creds, c)
	}
	k.mu.Unlock()
	changed := false
	for _, c := range creds {
		if c.load() {
			changed = true
		}
	}
	return changed
}

// Problems are the servers among servers whose grant was refused while
// running: each an error naming the login command. A server that never had
// a login fails to start instead, which is its own problem.
func (k *Keyring) Problems(servers []*config.Server) []config.Problem {
	var out []config.Problem
	for _, s := range servers {
		if s.Auth.Type != config.ServerAuthOAuth || (s.Auth.PerUser && s.Auth.Service != config.ServiceLogin) {
			continue
		}
		k.mu.Lock()
		c := k.creds[s.URL]
		k.mu.Unlock()
		if c == nil {
			continue
		}
		c.mu.Lock()
		refused := c.refused
		c.mu.Unlock()
		if refused != "" {
			out = append(out, config.Problem{Severity: config.SeverityError, File: s.File, Line: s.Line, Server: s.ID, Field: "auth",
				Message: (&LoginRequiredError{Server: s.ID, Reason: refused}).Error()})
		}
	}
	return out
}

// String keeps tokens out of any accidental %v of a keyring.
func (k *Keyring) String() string { return fmt.Sprintf("oauth.Keyring(%s)", k.opts.Store.Dir()) }

// Learn takes a grant this process obtained itself (a login offered to a
// client): the servers of its URL use it at once, without waiting for the
// store's watch.
func (k *Keyring) Learn(g *Grant) {
	k.mu.Lock()
	c := k.creds[g.Server]
	k.mu.Unlock()
	if c == nil {
		return // no server uses it yet; Transport loads it from the store
	}
	c.mu.Lock()
	// The login has just asked the server for its issuer.
	c.issuer, c.known, c.broken = g.Issuer, true, nil
	c.setLoaded(g, nil)
	c.mu.Unlock()
}

// retire hands the tokens of old that next does not hold to
// KeyringOptions.Retire: the access token is of no use past its expiry, a
// rotated refresh token was spent by the refresh (an hour's grace covers
// an issuer that takes it back a while).
func (k *Keyring) retire(old, next *Grant) {
	if k.opts.Retire == nil || old == nil {
		return
	}
	now := k.opts.Now()
	if old.AccessToken != "" && old.AccessToken != next.AccessToken && old.AccessToken != next.RefreshToken {
		until := old.Expiry
		if until.IsZero() || until.Before(now) {
			until = now
		}
		// A margin for clocks that disagree with the issuer's.
		k.opts.Retire(until.Add(retireMargin), old.AccessToken)
	}
	if old.RefreshToken != "" && old.RefreshToken != next.RefreshToken && old.RefreshToken != next.AccessToken {
		k.opts.Retire(now.Add(spentRefreshGrace), old.RefreshToken)
	}
}

// Tokens a refresh replaced stay scrubbed from the logs this long after
// they stop working.
const (
	retireMargin      = 5 * time.Minute
	spentRefreshGrace = time.Hour
)
