package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// transportForms lists the accepted transport values for messages.
const transportForms = "use stdio, streamable_http (alias http) or sse"

var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func validEnvName(s string) bool    { return s != "" && !strings.ContainsAny(s, "=\x00") }
func validHeaderName(s string) bool { return headerNamePattern.MatchString(s) }
func parseTransport(s string) (Transport, bool) {
	switch strings.ToLower(s) {
	case "stdio":
		return TransportStdio, true
	case "streamable_http", "http":
		return TransportHTTP, true
	case "sse":
		return TransportSSE, true
	}
	return "", false
}

// stdioOnly and remoteOnly are the keys that make sense for one kind of transport only.
var (
	stdioOnly  = []string{"command", "args", "cwd", "env", "inherit_env"}
	remoteOnly = []string{"url", "headers", "sessionId", "insecure"}
)

// checkTransport settles the transport, then checks the fields it needs and warns about
// the ones it ignores. Without a transport key, command means stdio and url alone means
// streamable_http.
func (s *serverReader) checkTransport() {
	srv := s.srv
	explicit := false
	if p, ok := s.f["transport"]; ok {
		if t, ok := s.text(p.v, "transport"); ok {
			tr, known := parseTransport(t.s)
			if !known {
				s.errorf(p.v.Line, "transport", "%s is not supported; %s", t.quoted(), transportForms)
				return
			}
			srv.Transport, explicit = tr, true
		}
	}
	if !explicit {
		srv.Transport = TransportStdio
		if !s.has("command") && s.has("url") {
			srv.Transport = TransportHTTP
		}
	}

	ignored := remoteOnly
	if srv.Transport != TransportStdio {
		ignored = stdioOnly
	}
	for _, key := range ignored {
		if p, ok := s.f[key]; ok {
			s.warnf(p.k.Line, key, "does not apply to the %s transport and is ignored; remove it", srv.Transport)
		}
	}
	if srv.Stateless {
		if p, ok := s.f["lease"]; ok {
			s.warnf(p.k.Line, "lease", "applies only when truely-stateless is false (one shared instance has no leases); remove it")
		}
	}
	if p, ok := s.f["sessionId"]; ok && srv.SessionID != "" {
		switch {
		case srv.Transport == TransportSSE:
			s.warnf(p.k.Line, "sessionId", "does not apply to the sse transport (an SSE server names the session on its stream) and is ignored; remove it")
		case srv.Transport != TransportStdio && !srv.Stateless:
			// A leased instance is its session's alone (its own upstream session).
			s.errorf(p.k.Line, "sessionId", "resumes one upstream session, which every leased instance of this server would share; set truely-stateless: true to resume it in the one shared instance, or remove sessionId")
		}
	}

	switch srv.Transport {
	case TransportStdio:
		_, chosen := s.f["transport"]
		switch {
		case srv.Command != "" || s.problemsFor("command"):
		case chosen:
			s.errorf(s.srv.Line, "command", "required for stdio transport; set command to the program that starts the server")
		default: // neither: which of the two the server lacks is not said
			s.errorf(s.srv.Line, "command", "required (or url: for a remote server); set command to the program that starts the server, or url to its endpoint, e.g. https://example.com/mcp")
		}
		s.checkCwd()
	default:
		if srv.URL == "" && !s.problemsFor("url") {
			s.errorf(s.srv.Line, "url", "required for %s transport; set url to the server's endpoint, e.g. https://example.com/mcp", srv.Transport)
			return
		}
		if p, ok := s.f["url"]; ok && srv.URL != "" {
			s.checkURL(srv.URL, p.v.Line)
		}
	}
}

// checkCwd requires a configured cwd to be an existing directory: the process could not
// start in anything else, and the operating system would blame the command for it. The
// path is not echoed when it came from the environment.
func (s *serverReader) checkCwd() {
	if s.cwd == nil {
		return
	}
	line := s.srv.Line
	if p, ok := s.f["cwd"]; ok && p.v != nil {
		line = p.v.Line
	}
	shown := s.cwd.quoted()
	if !s.cwd.fromEnv && s.srv.Cwd != s.cwd.s {
		shown += " (" + strconv.Quote(s.srv.Cwd) + ")"
	}
	info, err := os.Stat(s.srv.Cwd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.errorf(line, "cwd", "directory %s does not exist (relative paths are relative to the config file's directory); create it or fix the path", shown)
	case err != nil:
		s.errorf(line, "cwd", "cannot use %s as the working directory (%v); fix the path or its permissions", shown, errorCause(err))
	case !info.IsDir():
		s.errorf(line, "cwd", "%s is not a directory; set cwd to the directory the server should run in", shown)
	}
}

// problemsFor reports whether a field already has an error, so a missing value caused
// by, say, an unset variable is not reported twice.
func (s *serverReader) problemsFor(field string) bool {
	for _, p := range s.problems {
		if p.Field == field && p.Severity == SeverityError {
			return true
		}
	}
	return false
}

// checkURL requires http(s) with a host, and TLS unless the host is loopback or the
// server opts out with insecure: true. Nothing from the URL is echoed: it may carry
// secrets from the environment.
func (s *serverReader) checkURL(raw string, line int) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		s.errorf(line, "url", "not a valid http:// or https:// URL with a host; write it like https://example.com/mcp")
		return
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) && !s.srv.Insecure {
		optOut := "set insecure: true if you accept that"
		if s.foreign {
			// Another client's format has no such key.
			optOut = "if you accept that, turn this file into mcp-aggregator YAML (mcp-aggregator import FILE) and set insecure: true on the server there"
		}
		s.errorf(line, "url", "plain http:// to a non-loopback host sends requests and credentials unencrypted; use https://, or %s", optOut)
	}
}

// isLoopback reports whether host is localhost, 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// checkAllowedCommand enforces security.allowed_commands on a stdio server's command,
// comparing base names so "/usr/bin/npx" counts as "npx".
func checkAllowedCommand(d *serverDef, allowed []string) {
	srv := d.srv
	if len(allowed) == 0 || srv.Transport != TransportStdio || srv.Command == "" {
		return
	}
	base := filepath.Base(srv.Command)
	for _, a := range allowed {
		if base == a || base == filepath.Base(a) {
			return
		}
	}
	shown := strconv.Quote(srv.Command)
	if d.commandFromEnv {
		shown = "the command taken from the environment"
	}
	d.problems.errorf(d.commandLine, "command", "%s is not allowed; security.allowed_commands permits: %s; use one of them or add this command to the list",
		shown, strings.Join(allowed, ", "))
}
