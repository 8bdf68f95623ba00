package upstream

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
)

// redacted replaces a secret in error texts.
const redacted = "<redacted>"

// minScrubLen is the length from which a value of the server's is scrubbed from
// what is said about it; shorter values are too common to be told apart.
const minScrubLen = 4

// Scrub removes a server's secrets from text: every value of its resolved
// env and headers (which may come from the host environment or an env file;
// an Authorization header's credential alone too: config.Server.HeaderSecrets),
// every text its config took from the environment into any other field (a URL
// path, an argument, the command: config.Server.EnvSecrets), and the
// credentials (user name included) and query of its URL. Errors from network libraries quote URLs
// whole, so anything said about a server goes through here before it reaches
// a log, a problem or a client.
func Scrub(srv *config.Server, text string) string {
	for _, s := range secretsOf(srv) {
		text = strings.ReplaceAll(text, s, redacted)
	}
	return text
}

// scrubber is Scrub for many texts about one server: the server's secrets are
// gathered once.
func scrubber(srv *config.Server) func(string) string {
	secrets := secretsOf(srv)
	if len(secrets) == 0 {
		return func(text string) string { return text }
	}
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, redacted)
	}
	// At one position the replacer tries its pairs in order: longest first,
	// as in Scrub.
	r := strings.NewReplacer(pairs...)
	return r.Replace
}

// secretsOf lists what Scrub removes of srv's, longest first.
func secretsOf(srv *config.Server) []string {
	var secrets []string
	for _, v := range srv.Env {
		if len(v) >= minScrubLen {
			secrets = append(secrets, v)
		}
	}
	for _, v := range srv.HeaderSecrets() {
		if len(v) >= minScrubLen {
			secrets = append(secrets, v)
		}
	}
	for _, v := range srv.EnvSecrets() {
		if len(v) >= minScrubLen {
			secrets = append(secrets, v)
		}
	}
	if u, err := url.Parse(srv.URL); err == nil && srv.URL != "" {
		for _, v := range userSecrets(u.User) {
			if len(v) >= minScrubLen {
				secrets = append(secrets, v)
			}
		}
		if u.RawQuery != "" {
			secrets = append(secrets, u.RawQuery)
		}
	}
	// Each line of a value of several lines too: a process prints it one
	// line at a time.
	var lines []string
	for _, v := range secrets {
		for _, line := range redact.Lines(v)[1:] {
			if len(line) >= minScrubLen {
				lines = append(lines, line)
			}
		}
	}
	secrets = append(secrets, lines...)
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	return secrets
}

// userSecrets are the texts a URL's user information shows in: whole, and the
// user name alone, as written and decoded. The name is a credential too (a key
// sent as the user), and Go's HTTP client quotes a failed request's URL with
// the password starred but the name whole.
func userSecrets(user *url.Userinfo) []string {
	if user == nil {
		return nil
	}
	written, _, _ := strings.Cut(user.String(), ":")
	out := []string{user.String(), written, user.Username()}
	if p, ok := user.Password(); ok {
		out = append(out, p)
	}
	return out
}

// ScrubError is Scrub for an error; it keeps nothing of the original chain
// but its text, so callers classify an error before scrubbing it.
func ScrubError(srv *config.Server, err error) error {
	if err == nil {
		return nil
	}
	clean := Scrub(srv, err.Error())
	if clean == err.Error() {
		return err
	}
	return errors.New(clean)
}

// scrubHandler passes every log record about a server through Scrub: its
// stderr, our warnings, and what its transport logs about it.
type scrubHandler struct {
	slog.Handler
	srv *config.Server
}

func (h scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	clean := slog.NewRecord(r.Time, r.Level, Scrub(h.srv, r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		clean.AddAttrs(h.scrubAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, clean)
}

func (h scrubHandler) scrubAttr(a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindGroup {
		attrs := a.Value.Group()
		clean := make([]any, len(attrs))
		for i, ga := range attrs {
			clean[i] = h.scrubAttr(ga)
		}
		return slog.Group(a.Key, clean...)
	}
	return slog.String(a.Key, Scrub(h.srv, a.Value.String()))
}

func (h scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.scrubAttr(a)
	}
	return scrubHandler{Handler: h.Handler.WithAttrs(clean), srv: h.srv}
}

func (h scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{Handler: h.Handler.WithGroup(name), srv: h.srv}
}

// scrubbingLogger returns a logger that scrubs srv's secrets from everything.
func scrubbingLogger(log *slog.Logger, srv *config.Server) *slog.Logger {
	return slog.New(scrubHandler{Handler: log.Handler(), srv: srv})
}
