package config

import "net/url"

// Secrets returns every value of the workspace that may be a secret: the static tokens
// of http.auth, each server's env and header values (from the host, an env file or
// written in the config), the credentials and query of its URL, and every text that
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
	for _, s := range w.Servers {
		for _, m := range []map[string]string{s.Env, s.Headers} {
			for _, v := range m {
				out = append(out, v)
			}
		}
		out = append(out, s.EnvSecrets()...)
		if s.Auth.ClientSecret != "" {
			out = append(out, s.Auth.ClientSecret)
		}
		if u, err := url.Parse(s.URL); err == nil && s.URL != "" {
			if u.User != nil {
				out = append(out, u.User.String())
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

// EnvSecrets returns the texts the server's config took from the environment
// (FromEnv), each also in the escaped forms it takes inside a URL's path or query,
// where error messages of network libraries quote it: a value with a space or a
// slash is printed escaped there, not as written.
func (s *Server) EnvSecrets() []string {
	if s == nil || len(s.FromEnv) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.FromEnv))
	for _, v := range s.FromEnv {
		out = append(out, v)
		for _, e := range []string{url.PathEscape(v), url.QueryEscape(v)} {
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
