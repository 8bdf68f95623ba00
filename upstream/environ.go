package upstream

import (
	"net/url"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// InheritEnvVar names the host variable that lists more host variables (names or *
// patterns, separated by commas or like PATH) to pass to every stdio server. It is for
// wrappers that must reach every process, such as a proxy setting or a test harness's
// marker; a single server asks for more with inherit_env.
const InheritEnvVar = "MCP_AGGREGATOR_INHERIT_ENV"

// baseEnv is what every stdio server gets of the host environment, as the official MCP
// SDKs do: enough to find programs, a home, a temporary directory and the locale, and
// none of the host's credentials.
func baseEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
			"PROCESSOR_ARCHITECTURE", "PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP",
			"USERNAME", "USERPROFILE", "COMSPEC", "WINDIR"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_*", "TMPDIR"}
}

// aggregatorSecret reports whether a host variable holds the aggregator's own
// credentials: like srv.Withheld, a stdio server gets it only by naming it exactly.
func aggregatorSecret(name string) bool {
	return sameVar(name, "OTEL_EXPORTER_OTLP_HEADERS") || sameVar(name, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
}

// processEnv is the environment of srv's process, given the host's: the base, the host
// variables srv.InheritEnv and the host's MCP_AGGREGATOR_INHERIT_ENV name, and srv.Env
// over all of them. A value one server sets or copies from the host reaches no other:
// the variables the rest of the config reads for its secrets (srv.Withheld) and those
// of the aggregator's own credentials pass only when named exactly, never by true or
// a * pattern.
func processEnv(srv *config.Server, host []string) []string {
	patterns := append(baseEnv(), srv.InheritEnv...)
	for _, kv := range host {
		if name, value, _ := strings.Cut(kv, "="); sameVar(name, InheritEnvVar) {
			patterns = append(patterns, strings.FieldsFunc(value, func(r rune) bool {
				return r == ',' || r == ' ' || r == filepath.ListSeparator
			})...)
		}
	}
	out := make([]string, 0, len(patterns)+len(srv.Env))
	for _, kv := range host {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.HasPrefix(value, "()") { // "()": an exported shell function
			continue
		}
		if _, own := lookupVar(srv.Env, name); own || !matchesAny(patterns, name) {
			continue
		}
		if (containsVar(srv.Withheld, name) || aggregatorSecret(name)) &&
			!containsVar(patterns, name) && !matchesAny(baseEnv(), name) {
			continue // another's secret, matched only by a pattern
		}
		out = append(out, kv)
	}
	for k, v := range srv.Env {
		out = append(out, k+"="+v)
	}
	return out
}

// matchesAny reports whether a variable name matches one of the names or * patterns.
func matchesAny(patterns []string, name string) bool {
	if runtime.GOOS == "windows" {
		name = strings.ToUpper(name)
	}
	for _, p := range patterns {
		if runtime.GOOS == "windows" {
			p = strings.ToUpper(p)
		}
		if naming.Match(p, name) {
			return true
		}
	}
	return false
}

// lookupVar finds name in env, ignoring case where the OS does.
func lookupVar(env map[string]string, name string) (string, bool) {
	if v, ok := env[name]; ok {
		return v, true
	}
	if runtime.GOOS == "windows" {
		for k, v := range env {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
	}
	return "", false
}

// containsVar reports whether names holds name itself (not a pattern matching it).
func containsVar(names []string, name string) bool {
	for _, n := range names {
		if sameVar(n, name) {
			return true
		}
	}
	return false
}

func sameVar(a, b string) bool {
	if runtime.GOOS == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// inheritedSecrets returns the secrets among env, the environment processEnv made
// for srv, that srv inherited from the host beyond the safe base: the value of a
// variable whose name says it holds one (secretName), and the credentials of a
// value that is a URL with user information (a proxy's, a database's). Its own
// env is a secret already; the base (PATH, HOME, ...) never holds one.
func inheritedSecrets(srv *config.Server, env []string) []string {
	base := baseEnv()
	var out []string
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if _, own := lookupVar(srv.Env, name); own || value == "" || matchesAny(base, name) {
			continue
		}
		if config.SecretName(name) {
			out = append(out, value)
		}
		if u, err := url.Parse(value); err == nil && u.Host != "" && u.User != nil {
			out = append(out, u.User.String())
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
	}
	return out
}
