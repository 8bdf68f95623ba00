package upstreamauth

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/audit"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/credential"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// Timing of the watch on stored logins: a login saves one file at once, so
// a short debounce suffices; the poll backs up filesystems without events.
const (
	loginDebounce = 100 * time.Millisecond
	loginPoll     = 2 * time.Second
)

// Auth is how a command's upstreams are authorized: the keyring remote
// servers take their shared OAuth tokens from, the token exchangers of
// servers with auth: token_exchange, the per-user logins of
// http.auth.user_logins, the logins offered to clients and, for serve, a
// watch on the stored logins, started once the config has a server that
// uses OAuth.
type Auth struct {
	keyring *oauth.Keyring // nil: no user config directory to keep logins in
	store   *oauth.Store
	noDir   error
	log     *slog.Logger
	life    context.Context                  // logins offered to clients end with it
	servers atomic.Pointer[[]*config.Server] // of the workspace in effect
	watch   sync.Once
	changed chan struct{} // a stored login changed (login, logout); see Changed
	// audit writes the audit line of a token exchange or a per-user login
	// (proxy.Audit, set by auditTo once the proxy is built); nil: none.
	audit   atomic.Pointer[func(audit.Record)]
	mu      sync.Mutex
	offered map[string]*offeredLogin // logins under way for clients, by server id
	// exchangers make the token exchanges of servers with auth:
	// token_exchange, by server id, kept across the server's instances and
	// reloads that leave its auth alone (their tokens with them).
	exchangers map[string]*serverExchanger // guarded by mu
	secrets    *redact.Set
	// sharedOffers allows offering clients the shared login of a server
	// (an aggregator that serves one person).
	sharedOffers bool
	// users are the per-user logins, once http.auth.user_logins is set;
	// usersOf is the setting they were made for. Guarded by mu.
	users   *oauth.UserLogins
	usersOf config.UserLogins
	// stopSweep ends the sweep of the per-user logins in effect; guarded by mu.
	stopSweep context.CancelFunc
	// redirects is the gateway's callback of the per-user logins.
	redirects   atomic.Pointer[oauth.Redirects]
	userOffered map[userOfferKey]*offeredLogin // per-user logins under way; guarded by mu
	// refreshes are the refreshes of every login here, the keyring's and
	// the per-user logins' (those replaced by a new setting too), which
	// Close lets end.
	refreshes *oauth.Refreshes
}

// userOfferKey is a per-user login under way: whose, at which server.
type userOfferKey struct {
	server string
	entry  credential.VaultEntry
}

// serverExchanger is the Exchanger of one server's auth.
type serverExchanger struct {
	auth config.ServerAuth
	url  string
	ex   *credential.Exchanger
}

// offeredLogin is a login a client was asked to finish in a browser.
type offeredLogin struct {
	id   string // the elicitation's id
	url  string
	done *proxy.LoginDone // tells the clients it was offered to when it ends
}

// Options are what New needs.
type Options struct {
	// Secrets is the set the log is scrubbed of: every token Auth handles
	// is added to it.
	Secrets *redact.Set
	Logger  *slog.Logger
	// SharedOffers allows offering clients the shared login of a server:
	// only where the aggregator serves one person, as the login's browser
	// comes back to this machine's loopback and every client shares the
	// tokens it gets.
	SharedOffers bool
}

// New builds the keyring in the user's config directory (without one,
// servers that use OAuth cannot start, and Authorize says why). Logins
// offered to clients end with life.
func New(life context.Context, opts Options) *Auth {
	a := &Auth{log: opts.Logger, life: life, changed: make(chan struct{}, 1), offered: map[string]*offeredLogin{},
		exchangers: map[string]*serverExchanger{}, secrets: opts.Secrets, userOffered: map[userOfferKey]*offeredLogin{},
		sharedOffers: opts.SharedOffers, refreshes: oauth.NewRefreshes()}
	dir, err := oauth.DefaultDir()
	if err != nil {
		a.noDir = err
		return a
	}
	a.store = oauth.NewStore(dir)
	a.keyring = oauth.NewKeyring(oauth.KeyringOptions{Store: a.store, Logger: opts.Logger, Secrets: opts.Secrets.Add, Retire: opts.Secrets.Retire,
		Refreshes: a.refreshes})
	return a
}

// Close ends the refreshes of upstream logins before the process exits,
// the shared ones' and the callers' own (oauth.Refreshes.Close): none
// starts after it, and one already sent to the authorization server has
// its answer, whose rotated refresh token is the only one left, stored
// before Close returns, or ctx ends. Call it once the proxy is closed,
// with a bound of oauth.RefreshTimeout.
func (a *Auth) Close(ctx context.Context) error {
	err := a.refreshes.Close(ctx)
	if err != nil {
		a.log.Warn("exiting before a refresh of OAuth tokens ended; if the authorization server rotated the refresh token meanwhile, the login is lost", "err", err)
	}
	return err
}

// AuditTo sends the audit lines of token exchanges and per-user logins to
// write (Proxy.Audit).
func (a *Auth) AuditTo(write func(audit.Record)) { a.audit.Store(&write) }

// Changed delivers when a stored login changed (a login, a logout, a
// login offered to a client that completed): the servers that waited for
// it can start now.
func (a *Auth) Changed() <-chan struct{} { return a.changed }

// record writes the audit line of a token exchange or a per-user login of
// caller at server: outcome ok, or error with err (logged, never in the line).
func (a *Auth) record(event, server string, caller identity.Caller, took time.Duration, err error) {
	write := a.audit.Load()
	if write == nil {
		return
	}
	r := audit.Record{Event: event, Method: event, Principal: proxy.AuditPrincipal(caller), Server: server,
		Outcome: audit.OK, DurationMS: float64(took.Microseconds()) / 1000}
	if err != nil {
		r.Outcome = audit.Error
	}
	(*write)(r)
}

// Authorize is upstream.Options.Authorize: the transport that carries
// srv's credentials (a token exchanged for the caller's, the caller's own
// login, or the shared login) over base.
func (a *Auth) Authorize(srv *config.Server, base http.RoundTripper) (http.RoundTripper, error) {
	if srv.Auth.Type == config.ServerAuthTokenExchange {
		target, err := url.Parse(srv.URL)
		if err != nil {
			return nil, fmt.Errorf("server %q: url: %w", srv.ID, err)
		}
		return credential.ExchangeTransport(base, sameorigin.Origin(target), a.exchanger(srv)), nil
	}
	if srv.Auth.PerUser {
		a.mu.Lock()
		users := a.users
		a.mu.Unlock()
		if users == nil {
			return nil, fmt.Errorf("auth: per_user: each caller's login is used by serve --http with http.auth.user_logins, and none is set up here (a key that cannot be read is said in the log)")
		}
		callers, err := users.Transport(srv, base)
		if err != nil || srv.Auth.Service != config.ServiceLogin {
			return callers, err
		}
		// auth.service: login: the requests no caller made carry the
		// aggregator's own login, as a shared server's requests do.
		if a.keyring == nil {
			return nil, fmt.Errorf("auth.service: login: %v", a.noDir)
		}
		own, err := a.keyring.Transport(srv, base)
		if err != nil {
			return nil, err
		}
		return credential.ByCaller(callers, own), nil
	}
	if a.keyring == nil {
		return nil, fmt.Errorf("auth: %v", a.noDir)
	}
	return a.keyring.Transport(srv, base)
}

// exchanger is srv's Exchanger: the one it had while its auth and url
// stay as they were, else a new one.
func (a *Auth) exchanger(srv *config.Server) *credential.Exchanger {
	a.mu.Lock()
	defer a.mu.Unlock()
	if se := a.exchangers[srv.ID]; se != nil && se.url == srv.URL && sameServerAuth(se.auth, srv.Auth) {
		return se.ex
	}
	audience := srv.Auth.Audience
	if audience == "" {
		audience = srv.URL
	}
	ex := credential.NewExchanger(credential.ExchangeOptions{Server: srv.ID, TokenEndpoint: srv.Auth.TokenEndpoint, Issuer: srv.Auth.Issuer,
		ClientID: srv.Auth.ClientID, ClientSecret: identity.NewSecret(srv.Auth.ClientSecret), Audience: audience, Scopes: srv.Auth.Scopes,
		Service: srv.Auth.Service == config.ServiceClientCredentials,
		Logger:  a.log, Scrub: func(token string, until time.Time) {
			a.secrets.Add(token)
			a.secrets.Retire(until, token)
		}, Exchanged: func(c identity.Caller, took time.Duration, err error) {
			a.record("token_exchange", srv.ID, c, took, err)
		}})
	a.exchangers[srv.ID] = &serverExchanger{auth: srv.Auth, url: srv.URL, ex: ex}
	return ex
}

// sameServerAuth reports whether two auth settings are the same.
func sameServerAuth(x, y config.ServerAuth) bool {
	return x.Type == y.Type && x.ClientID == y.ClientID && x.ClientSecret == y.ClientSecret && slices.Equal(x.Scopes, y.Scopes) &&
		x.Audience == y.Audience && x.TokenEndpoint == y.TokenEndpoint && x.Issuer == y.Issuer && x.PerUser == y.PerUser && x.Service == y.Service
}

// Problems is proxy.Options.AuthProblems: the servers of the workspace in
// effect that the keyring cannot authorize.
func (a *Auth) Problems() []config.Problem {
	servers := a.servers.Load()
	if a.keyring == nil || servers == nil {
		return nil
	}
	return a.keyring.Problems(*servers)
}

// OnWorkspace follows the workspace in effect; with its first server that
// uses OAuth, ctx permitting, it starts watching the stored logins.
func (a *Auth) OnWorkspace(ctx context.Context, ws *config.Workspace) {
	servers := append([]*config.Server(nil), ws.Servers...)
	a.servers.Store(&servers)
	a.setUserLogins(ws.HTTP.Auth.UserLogins)
	if a.keyring == nil || ctx == nil {
		return
	}
	for _, s := range servers {
		if sharedLogin(s) {
			a.watch.Do(func() { a.watchLogins(ctx) })
			return
		}
	}
}

// watchLogins signals changed whenever a stored login differs from what
// the keyring holds; the keyring's own saves (refreshed tokens) do not.
func (a *Auth) watchLogins(ctx context.Context) {
	events, err := a.store.Watch(ctx, loginDebounce, loginPoll)
	if err != nil {
		a.log.Warn("cannot watch the stored OAuth logins; restart or send SIGHUP after a login", "err", err)
		return
	}
	go func() {
		for range events {
			if a.keyring.Sync() {
				select {
				case a.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
}

// sharedLogin reports whether s uses the aggregator's own stored login: a
// server with auth: {type: oauth}, or a per-user one for the requests no
// caller made (auth.service: login).
func sharedLogin(s *config.Server) bool {
	return s.Auth.Type == config.ServerAuthOAuth && (!s.Auth.PerUser || s.Auth.Service == config.ServiceLogin)
}

// MissingLogins warns about servers that use OAuth and have no usable
// stored login: they will not start until someone logs in. A warning, not
// an error: the config is right, and a login is a step of its own.
func MissingLogins(ws *config.Workspace) []config.Problem {
	var out []config.Problem
	var store *oauth.Store
	for _, s := range ws.Servers {
		if !sharedLogin(s) {
			continue
		}
		if store == nil {
			dir, err := oauth.DefaultDir()
			if err != nil {
				return append(out, config.Problem{Severity: config.SeverityWarning, Field: "auth", Message: err.Error()})
			}
			store = oauth.NewStore(dir)
		}
		// Which of the stored logins (one per issuer) is the server's is
		// known once it is asked; here, without a request, any will do.
		reason := ""
		switch grants, err := store.LoadAll(s.URL); {
		case err != nil:
			reason = err.Error()
		case len(grants) == 0:
			reason = "not logged in"
		case s.Auth.ClientID != "" && grants[0].ClientID != s.Auth.ClientID:
			reason = "the stored login was made with another client than auth.client_id"
		}
		if reason != "" {
			out = append(out, config.Problem{Severity: config.SeverityWarning, File: s.File, Line: s.Line, Server: s.ID, Field: "auth",
				Message: (&oauth.LoginRequiredError{Server: s.ID, Reason: reason}).Error() + "; the server will not start until then"})
		}
	}
	return out
}

// offerWait bounds how long a client's call waits for the authorization URL
// (discovery and registration come first).
const offerWait = 30 * time.Second

// OfferLogin is proxy.Options.OfferLogin: it runs the login of server on
// this machine, as `mcp-aggregator login` does, for a client that declared
// URL-mode elicitation, and returns the URL for its user to open. A second
// call while that login is under way gets the same URL. The login saves
// the tokens it gets; the store's watch then brings the server back, and
// the clients offered it are sent notifications/elicitation/complete.
func (a *Auth) OfferLogin(ctx context.Context, server string) (string, string, *proxy.LoginDone, error) {
	var srv *config.Server
	if servers := a.servers.Load(); servers != nil {
		for _, s := range *servers {
			if s.ID == server && s.Auth.Type == config.ServerAuthOAuth {
				srv = s
			}
		}
	}
	if srv != nil && srv.Auth.PerUser {
		return a.offerUserLogin(ctx, srv)
	}
	if srv == nil || a.keyring == nil || !a.sharedOffers {
		return "", "", nil, fmt.Errorf("server %q cannot be logged in to from here", server)
	}
	a.mu.Lock()
	if o := a.offered[server]; o != nil && o.url != "" {
		a.mu.Unlock()
		return o.url, o.id, o.done, nil
	}
	if o := a.offered[server]; o != nil {
		// Discovery and registration are under way: this call gets the
		// offer once it is known.
		a.mu.Unlock()
		return "", "", nil, fmt.Errorf("the login of server %q is being prepared; try again in a moment", server)
	}
	o := &offeredLogin{id: rand.Text(), done: proxy.NewLoginDone()}
	a.offered[server] = o
	a.mu.Unlock()

	type outcome struct {
		url string
		err error
	}
	first := make(chan outcome, 1)
	go func() {
		ok := false
		defer func() {
			a.mu.Lock()
			delete(a.offered, server)
			a.mu.Unlock()
			o.done.Finish(ok)
		}()
		grant, err := oauth.Login(a.life, oauth.LoginOptions{Server: srv, Authorize: func(url string) {
			a.mu.Lock()
			o.url = url
			a.mu.Unlock()
			first <- outcome{url: url}
		}})
		if err == nil {
			a.keyring.Learn(grant)
			err = a.store.Save(grant)
		}
		if err != nil {
			select {
			case first <- outcome{err: err}:
			default:
				a.log.Warn("a login offered to a client did not complete", "server", server, "err", err)
			}
			return
		}
		ok = true
		a.log.Info("logged in through a client's browser", "server", server)
		// The keyring knows the login already, so the watch on the stored
		// logins sees nothing new; a server that could not start without
		// it starts with the reload (running servers are not touched).
		select {
		case a.changed <- struct{}{}:
		default:
		}
	}()
	wait := time.NewTimer(offerWait)
	defer wait.Stop()
	select {
	case r := <-first:
		if r.err != nil {
			return "", "", nil, r.err
		}
		return r.url, o.id, o.done, nil
	case <-wait.C:
		return "", "", nil, fmt.Errorf("no authorization URL within %s", offerWait)
	case <-ctx.Done():
		return "", "", nil, ctx.Err()
	}
}
