package upstream

import (
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

// processEnv is the environment of srv's process, given the host's: the base, the host
// variables srv.InheritEnv and the host's MCP_AGGREGATOR_INHERIT_ENV name, and srv.Env
// over all of them. A value one server sets or copies from the host reaches no other.
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

func sameVar(a, b string) bool {
	if runtime.GOOS == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}
