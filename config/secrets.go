package config

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// Secrets returns every value of the workspace that may be a secret: the static tokens
// of http.auth, each server's env and header values (from the host, an env file or
// written in the config; HeaderSecrets), the credentials and query of its URL, and every text that
// ${VAR} or {env: VAR} took from the environment into any of its fields (FromEnv), so
// that a secret placed in a URL path or an argument is covered too. Logs are scrubbed
// of all of them, whichever server a line is about: a value one server holds may show
// up in another's output.
func (w *Workspace) Secrets() []string {
	if w == nil {
		return nil
	}
	var out []string
	for _, token := range w.HTTP.Auth.Tokens {
		out = append(out, token)
	}
	if u := w.HTTP.Auth.UserLogins; u != nil && u.Key != "" {
		out = append(out, u.Key)
	}
	for _, s := range w.Servers {
		for _, v := range s.Env {
			out = append(out, v)
		}
		out = append(out, s.HeaderSecrets()...)
		out = append(out, s.EnvSecrets()...)
		if s.Auth.ClientSecret != "" {
			out = append(out, s.Auth.ClientSecret)
		}
		if u, err := url.Parse(s.URL); err == nil && s.URL != "" {
			if u.User != nil {
				// The user name alone too: it may be the key (https://KEY:@host),
				// and Go's HTTP client quotes a URL with the password starred, not
				// the name.
				name, _, _ := strings.Cut(u.User.String(), ":")
				out = append(out, u.User.String(), name, u.User.Username())
				if p, ok := u.User.Password(); ok {
					out = append(out, p)
				}
			}
			if u.RawQuery != "" {
				out = append(out, u.RawQuery)
				for _, vs := range u.Query() {
					out = append(out, vs...)
				}
			}
		}
	}
	return out
}

// HeaderSecrets returns the server's header values and, of an Authorization or
// Proxy-Authorization value ("Bearer TOKEN", "Basic BASE64"), the credential alone, and
// of a Basic one also the user:password it encodes and the password: a server that
// refuses a token tends to quote it without its scheme.
func (s *Server) HeaderSecrets() []string {
	if s == nil || len(s.Headers) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.Headers))
	for name, v := range s.Headers {
		out = append(out, v)
		if !strings.EqualFold(name, "Authorization") && !strings.EqualFold(name, "Proxy-Authorization") {
			continue
		}
		scheme, credential, ok := strings.Cut(strings.TrimSpace(v), " ")
		if credential = strings.TrimSpace(credential); !ok || credential == "" {
			continue
		}
		out = append(out, credential)
		if !strings.EqualFold(scheme, "Basic") {
			continue
		}
		if pair, err := base64.StdEncoding.DecodeString(credential); err == nil {
			out = append(out, string(pair))
			if _, password, ok := strings.Cut(string(pair), ":"); ok {
				out = append(out, password)
			}
		}
	}
	return distinct(out)
}

// EnvSecrets returns the texts the server's config took from the environment
// (FromEnv), each also in the escaped forms it takes inside a URL's path or query,
// where error messages of network libraries quote it: a value with a space or a
// slash is printed escaped there, not as written (a path keeps its slashes).
func (s *Server) EnvSecrets() []string {
	if s == nil || len(s.FromEnv) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.FromEnv))
	for _, v := range s.FromEnv {
		out = append(out, v)
		path := (&url.URL{Path: v}).EscapedPath()
		for _, e := range []string{url.PathEscape(v), path, url.QueryEscape(v)} {
			if e != v {
				out = append(out, e)
			}
		}
	}
	return distinct(out)
}

// distinct returns values without repeats, in first-seen order; nil when empty.
func distinct(values []string) []string {
	if len(values) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(values))
	out := make([]string, 0, len(values))
	for _, v := range values {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// SecretName reports whether a variable's name says it holds a secret, as
// AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN or NPM_AUTH do.
func SecretName(name string) bool {
	upper := strings.ToUpper(name)
	for _, word := range strings.FieldsFunc(upper, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		switch word {
		case "TOKEN", "SECRET", "KEY", "APIKEY", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE",
			"CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "COOKIE", "SESSION", "PRIVATE":
			return true
		}
	}
	for _, end := range []string{"TOKEN", "SECRET", "KEY", "PASSWORD"} {
		if strings.HasSuffix(upper, end) {
			return true
		}
	}
	return false
}

// urlPathFromEnv returns the parts of a URL's path that ${VAR} filled in, when
// the variable's text reaches beyond the path (url: ${MCP_URL}). Such a text is
// a secret whole already, but a network library's error does not quote it whole:
// it shows the URL with the password starred and the query its own, so the path
// in it (https://hooks.example.com/T000/B000/KEY) would show. A part of the path
// written in the config itself is not a secret; one that a variable filled in
// and no more than that is one already.
func urlPathFromEnv(t text) []string {
	start, end := urlPathSpan(t.s)
	if start < 0 {
		return nil
	}
	var out []string
	for _, sp := range t.spans {
		if sp.start >= start && sp.end <= end {
			continue // within the path: the text itself is the secret
		}
		if from, to := max(sp.start, start), min(sp.end, end); from < to {
			out = append(out, t.s[from:to])
		}
	}
	return out
}

// urlPathSpan is where the path of an absolute URL lies in raw, [start, end), or
// -1, -1 when raw names no scheme and authority.
func urlPathSpan(raw string) (start, end int) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return -1, -1
	}
	start = i + len("://")
	if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
		start += j
	} else {
		start = len(raw)
	}
	end = len(raw)
	if j := strings.IndexAny(raw[start:], "?#"); j >= 0 {
		end = start + j
	}
	return start, end
}
