package upstreamauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/credential"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// setUserLogins sets up the per-user logins for http.auth.user_logins, or
// keeps them while the setting is the same. A key that cannot be read
// leaves per-user servers unable to start, with the reason in the log.
func (a *Auth) setUserLogins(u *config.UserLogins) {
	if u == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.users != nil && a.usersOf == *u {
		return
	}
	key, err := vaultKey(u)
	if err == nil && a.noDir != nil {
		err = a.noDir
	}
	var vault *credential.Vault
	if err == nil {
		dir, derr := oauth.DefaultDir()
		if derr != nil {
			err = derr
		} else {
			vault, err = credential.NewVault(filepath.Join(dir, "per-user"), key)
		}
	}
	if err != nil {
		a.log.Error("cannot keep per-user logins: servers with auth.per_user will not start", "err", err)
		a.users = nil
		return
	}
	vault.SetMax(u.MaxLogins)
	redirects := oauth.NewRedirects(u.Callback)
	a.redirects.Store(redirects)
	a.users = oauth.NewUserLogins(oauth.UserLoginsOptions{Vault: vault, Redirects: redirects, Logger: a.log, Secrets: a.secrets.Add,
		MaxUnused: u.MaxUnused, Refreshes: a.refreshes})
	a.usersOf = *u
	if a.stopSweep != nil {
		a.stopSweep()
		a.stopSweep = nil
	}
	if a.life == nil {
		return
	}
	ctx, cancel := context.WithCancel(a.life)
	a.stopSweep = cancel
	go a.sweepLogins(ctx, a.users)
}

// sweepEvery is how often the stored per-user logins are swept.
const sweepEvery = time.Hour

// sweepLogins removes, at once and then every sweepEvery until ctx ends,
// the per-user logins that expired unrenewably or went unused for
// http.auth.user_logins.max_unused.
func (a *Auth) sweepLogins(ctx context.Context, users *oauth.UserLogins) {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		switch n, err := users.Sweep(); {
		case err != nil:
			a.log.Warn("could not sweep the stored per-user logins", "err", err)
		case n > 0:
			a.log.Info("removed stored per-user logins that expired or went unused", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// logoutAnswer is what POST config.LogoutPath answers.
type logoutAnswer struct {
	// LoggedOut are the servers the caller's login to was ended;
	// NotLoggedIn those the caller had none at.
	LoggedOut   []string `json:"loggedOut"`
	NotLoggedIn []string `json:"notLoggedIn"`
	// NotRevoked are the servers whose authorization server could not be
	// asked to revoke the tokens (the log says why); they are forgotten
	// here all the same.
	NotRevoked []string `json:"notRevoked,omitempty"`
}

// Logout is the gateway's handler of config.LogoutPath: POST ends the
// caller's own per-user login to the server of ?server=ID, or to every
// per-user server without it; the caller is who the request's
// credentials name, as on /mcp.
func (a *Auth) Logout() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST to end your per-user logins (?server=ID for one server)", http.StatusMethodNotAllowed)
			return
		}
		caller := identity.CallerOf(r.Context())
		if !caller.Principal.Authenticated() {
			http.Error(w, "per-user logins belong to authenticated callers, and this request names none; send the credentials you use on /mcp", http.StatusUnauthorized)
			return
		}
		a.mu.Lock()
		users := a.users
		a.mu.Unlock()
		want := r.URL.Query().Get("server")
		var servers []*config.Server
		if all := a.servers.Load(); all != nil {
			for _, s := range *all {
				if s.Auth.Type == config.ServerAuthOAuth && s.Auth.PerUser && (want == "" || s.ID == want) {
					servers = append(servers, s)
				}
			}
		}
		switch {
		case users == nil:
			http.Error(w, "no per-user logins are kept here (http.auth.user_logins)", http.StatusNotFound)
			return
		case want != "" && len(servers) == 0:
			http.Error(w, fmt.Sprintf("no server %q with a login per user (auth: {type: oauth, per_user: true})", want), http.StatusNotFound)
			return
		}
		out := logoutAnswer{LoggedOut: []string{}, NotLoggedIn: []string{}}
		for _, srv := range servers {
			start := time.Now()
			stored, err := users.Logout(r.Context(), srv, caller)
			if !stored {
				out.NotLoggedIn = append(out.NotLoggedIn, srv.ID)
				continue
			}
			out.LoggedOut = append(out.LoggedOut, srv.ID)
			if err != nil {
				out.NotRevoked = append(out.NotRevoked, srv.ID)
				a.log.Warn("a caller logged out, and the authorization server could not be asked to revoke the tokens", "server", srv.ID,
					"principal", caller.Principal, "err", err)
			} else {
				a.log.Info("a caller logged out of a server", "server", srv.ID, "principal", caller.Principal)
			}
			a.record("logout", srv.ID, caller, time.Since(start), err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// vaultKey reads the key of http.auth.user_logins.
func vaultKey(u *config.UserLogins) ([]byte, error) {
	if u.KeyFile != "" {
		return credential.ReadKeyFile(u.KeyFile)
	}
	return credential.ParseKey(u.Key)
}

// Callback is the gateway's handler of config.LoginCallbackPath: the
// redirects of the per-user logins in effect.
func (a *Auth) Callback() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs := a.redirects.Load()
		if rs == nil {
			http.NotFound(w, r)
			return
		}
		rs.ServeHTTP(w, r)
	})
}

// offerUserLogin is OfferLogin for a per-user server: the login of the
// caller of ctx, whose browser comes back to the gateway's callback. A
// second call of the same caller while it is under way gets the same URL.
func (a *Auth) offerUserLogin(ctx context.Context, srv *config.Server) (string, string, *proxy.LoginDone, error) {
	caller := identity.CallerOf(ctx)
	if !caller.Principal.Authenticated() {
		return "", "", nil, fmt.Errorf("server %q keeps a login per caller, and this call names none", srv.ID)
	}
	key := userOfferKey{server: srv.ID, entry: credential.EntryOf(srv.ID, caller)}
	a.mu.Lock()
	users := a.users
	if users == nil {
		a.mu.Unlock()
		return "", "", nil, fmt.Errorf("server %q: per-user logins are not set up (http.auth.user_logins)", srv.ID)
	}
	if o := a.userOffered[key]; o != nil {
		url := o.url
		a.mu.Unlock()
		if url == "" {
			return "", "", nil, fmt.Errorf("your login to server %q is being prepared; try again in a moment", srv.ID)
		}
		return url, o.id, o.done, nil
	}
	o := &offeredLogin{id: rand.Text(), done: proxy.NewLoginDone()}
	a.userOffered[key] = o
	a.mu.Unlock()

	first := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			a.mu.Lock()
			delete(a.userOffered, key)
			a.mu.Unlock()
			o.done.Finish(err == nil)
			select {
			case first <- err:
			default:
			}
		}()
		start := time.Now()
		lctx, cancel := context.WithTimeout(a.life, oauth.DefaultLoginTimeout)
		defer cancel()
		err = users.Login(lctx, srv, caller, func(url string) {
			a.mu.Lock()
			o.url = url
			a.mu.Unlock()
			first <- nil
		})
		if err != nil {
			a.log.Warn("a caller's login to a server did not complete", "server", srv.ID, "principal", caller.Principal, "err", err)
		} else {
			a.log.Info("a caller logged in to a server", "server", srv.ID, "principal", caller.Principal)
		}
		a.record("login", srv.ID, caller, time.Since(start), err)
	}()
	select {
	case err := <-first:
		if err != nil {
			return "", "", nil, err
		}
	case <-ctx.Done():
		return "", "", nil, context.Cause(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return o.url, o.id, o.done, nil
}
