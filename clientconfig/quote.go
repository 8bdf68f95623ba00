package clientconfig

import (
	"bytes"
	"encoding/json"
	"strings"
)

// jsonSnippet renders {"<container>": {"<name>": server}} as indented JSON.
func jsonSnippet(container, name string, server map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{container: map[string]any{name: server}})
	return buf.String()
}

// shellLine quotes words for a POSIX shell.
func shellLine(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = shellQuote(w)
	}
	return strings.Join(out, " ")
}

// shellQuote quotes s for a POSIX shell, leaving a word that needs no quotes
// as it is.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tomlString renders a TOML basic string; JSON's escapes are valid TOML ones.
func tomlString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// tomlKey renders a TOML key: bare when it may be, else quoted.
func tomlKey(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == "" {
		return s
	}
	return tomlString(s)
}
