package config

import "net/url"

// Secrets returns every value of the workspace that may be a secret: the static tokens
// of http.auth, each server's env
// and header values (from the host, an env file or written in the config) and the
// credentials and query of its URL. Logs are scrubbed of all of them, whichever server a
// line is about: a value one server holds may show up in another's output.
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
