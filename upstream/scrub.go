package upstream

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// redacted replaces a secret in error texts.
const redacted = "<redacted>"

// minScrubLen is the length from which a value of the server's is scrubbed from
// what is said about it; shorter values are too common to be told apart.
const minScrubLen = 4

// Scrub removes a server's secrets from text: every value of its resolved
// env and headers (which may come from the host environment or an env file),
// every text its config took from the environment into any other field (a URL
// path, an argument, the command: config.Server.EnvSecrets), and the
// credentials and query of its URL. Errors from network libraries quote URLs
// whole, so anything said about a server goes through here before it reaches
// a log, a problem or a client.
func Scrub(srv *config.Server, text string) string {
	var secrets []string
	for _, m := range []map[string]string{srv.Env, srv.Headers} {
		for _, v := range m {
			if len(v) >= minScrubLen {
				secrets = append(secrets, v)
			}
		}
	}
	for _, v := range srv.EnvSecrets() {
		if len(v) >= minScrubLen {
			secrets = append(secrets, v)
		}
	}
	if u, err := url.Parse(srv.URL); err == nil && srv.URL != "" {
		if u.User != nil {
			secrets = append(secrets, u.User.String())
		}
		if u.RawQuery != "" {
			secrets = append(secrets, u.RawQuery)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, redacted)
	}
	return text
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
// stderr, our warnings, and what mcp-go's transports log about it.
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
