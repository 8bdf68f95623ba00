package config

import (
	"net/url"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// UserLogins is http.auth.user_logins: where the per-user logins of
// servers with auth.per_user are kept, and where the browser comes back.
type UserLogins struct {
	// Key seals the stored logins (AES-256-GCM): 32 bytes as 64 hex digits
	// or base64, from the environment (a secret value!); "" with KeyFile.
	Key string
	// KeyFile is the file that holds the key instead, read at start.
	KeyFile string
	// Callback is the gateway's own URL the authorization servers redirect
	// the browser to; its path is served by the gateway.
	Callback string
	// MaxUnused removes a stored login no call used for this long
	// (DefaultMaxUnused when not set; 0 keeps them).
	MaxUnused time.Duration
	// MaxLogins bounds the logins stored (DefaultMaxLogins when not set;
	// 0: no bound); a new login over it is refused.
	MaxLogins int
}

// Defaults of http.auth.user_logins.
const (
	DefaultMaxUnused = 90 * 24 * time.Hour
	DefaultMaxLogins = 10000
)

// LogoutPath is where a caller of the gateway ends their own per-user
// logins (POST, with the credentials of /mcp).
const LogoutPath = "/oauth/logout"

// LoginCallbackPath is the path of the gateway's callback when
// user_logins.callback is not set: on the origin of http.auth.oauth's
// audience.
const LoginCallbackPath = "/oauth/callback"

// readUserLogins reads http.auth.user_logins.
func readUserLogins(r *reader, lookupEnv func(string) (string, bool), n *yaml.Node, o *OAuth) *UserLogins {
	const field = "http.auth.user_logins"
	if !r.mapping(n, field, "key: {env: VAR} or key_file: PATH, and callback: URL, max_unused, max_logins") || isNull(n) {
		return nil
	}
	u := &UserLogins{MaxUnused: DefaultMaxUnused, MaxLogins: DefaultMaxLogins}
	line := deref(n).Line
	f := r.fields(n, field+".", "key", "key_file", "callback", "max_unused", "max_logins")
	if p, ok := f["max_unused"]; ok {
		if d, ok := r.duration(p.v, field+".max_unused"); ok {
			u.MaxUnused = d
		}
	}
	if p, ok := f["max_logins"]; ok {
		if n, ok := r.count(p.v, field+".max_logins"); ok {
			u.MaxLogins = n
		}
	}
	if p, ok := f["key"]; ok {
		if v := deref(p.v); v.Kind != yaml.MappingNode {
			r.errorf(p.v.Line, field+".key", "must be {env: VAR}: a key is kept out of the config file")
		} else if val, ok := tokenValue(r, lookupEnv, p.v, field+".key"); ok {
			u.Key = val
			r.noteTaken(val)
		}
	}
	if p, ok := f["key_file"]; ok {
		if t, ok := r.text(p.v, field+".key_file"); ok && t.s != "" {
			u.KeyFile = t.s
		}
	}
	_, hasKey := f["key"]
	_, hasFile := f["key_file"]
	switch {
	case hasKey && hasFile:
		r.errorf(line, field, "sets both key and key_file; keep one")
	case !hasKey && !hasFile:
		r.errorf(line, field+".key", "required: the logins are stored encrypted; set key: {env: VAR} or key_file: PATH holding 32 random bytes (openssl rand -base64 32)")
	}
	if p, ok := f["callback"]; ok {
		if t, ok := r.text(p.v, field+".callback"); ok {
			cb, err := url.Parse(t.s)
			if err != nil || cb.Host == "" || cb.User != nil || cb.RawQuery != "" || cb.Fragment != "" || cb.Path != LoginCallbackPath ||
				!(cb.Scheme == "https" || cb.Scheme == "http" && isLoopback(cb.Hostname())) {
				r.errorf(p.v.Line, field+".callback", "must be this gateway's https URL (http on loopback only) of the path %s, without query or fragment, e.g. https://gateway.example.com%s", LoginCallbackPath, LoginCallbackPath)
			} else {
				u.Callback = t.s
			}
		}
	} else if o != nil && o.Audience != "" {
		if aud, err := url.Parse(o.Audience); err == nil && aud.Host != "" {
			u.Callback = strings.ToLower(aud.Scheme) + "://" + aud.Host + LoginCallbackPath
		}
	}
	if u.Callback == "" && !hasError(r.problems, field+".callback") {
		r.errorf(line, field+".callback", "required without http.auth.oauth: set it to this gateway's URL of %s, e.g. https://gateway.example.com%s", LoginCallbackPath, LoginCallbackPath)
	}
	return u
}

// checkPerUser requires per_user logins to have where to be kept and
// callers to tell apart.
func checkPerUser(d *serverDef, ws *Workspace) {
	if !d.srv.Auth.PerUser {
		return
	}
	switch {
	case !ws.HTTP.Auth.Enabled():
		d.problems.errorf(d.authLine, "auth.per_user", "keeps a login per caller, and http.auth is not set, so callers are not told apart; set http.auth, or remove per_user for one shared login")
	case ws.HTTP.Auth.UserLogins == nil:
		d.problems.errorf(d.authLine, "auth.per_user", "needs http.auth.user_logins (the key the logins are stored encrypted with, and the gateway's callback URL); add it")
	}
}

// hasError reports whether problems hold an error of field.
func hasError(problems []Problem, field string) bool {
	for _, p := range problems {
		if p.Field == field && p.Severity == SeverityError {
			return true
		}
	}
	return false
}
