package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expansion is the result of expanding the ${VAR} references in one string.
type expansion struct {
	value   string
	fromEnv bool     // some reference was filled from the environment: treat value as secret
	missing []string // referenced variables that are not set and have no default
	taken   []string // the non-empty texts filled in from the environment, in order
	spans   []span   // where in value each of taken lies, in the same order
}

// span is where a part of a string lies: [start, end).
type span struct{ start, end int }

// interpolate expands ${VAR} and ${VAR:-default} using lookup; "$$" is a literal "$" and
// a "$" not followed by "{" or "$" is kept as is. A default applies when the variable is
// unset or empty, as in the shell. Substituted text is never expanded again. Errors
// describe the syntax problem without repeating the input.
func interpolate(s string, lookup func(string) (string, bool)) (expansion, error) {
	if !strings.Contains(s, "$") {
		return expansion{value: s}, nil
	}
	var (
		out strings.Builder
		x   expansion
	)
	for i := 0; i < len(s); {
		if s[i] != '$' {
			out.WriteByte(s[i])
			i++
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			out.WriteByte('$')
			i += 2
			continue
		}
		if i+1 >= len(s) || s[i+1] != '{' {
			out.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return expansion{}, errors.New("a ${ has no closing }; close it, or write $$ for a literal $")
		}
		name, def, hasDef := strings.Cut(s[i+2:i+2+end], ":-")
		if !varName.MatchString(name) {
			return expansion{}, fmt.Errorf("${%s} does not name a variable; use ${NAME} with letters, digits and _, or write $$ for a literal $", safeName(name))
		}
		switch v, ok := lookup(name); {
		case ok && (v != "" || !hasDef):
			start := out.Len()
			out.WriteString(v)
			x.fromEnv = true
			if v != "" {
				x.taken = append(x.taken, v)
				x.spans = append(x.spans, span{start, out.Len()})
			}
		case hasDef:
			out.WriteString(def)
		default:
			x.missing = append(x.missing, name)
		}
		i += 2 + end + 1
	}
	x.value = out.String()
	return x, nil
}

// safeName shortens text taken from a malformed reference so it stays readable.
func safeName(s string) string {
	const max = 40
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// parseDotenv reads KEY=VALUE lines: blank lines and # comments are skipped, an
// "export " prefix is allowed, and values may be single-quoted (literal), double-quoted
// (with \n, \t, \r, \" and \\ escapes) or bare (ending at " #"). It returns the variables
// and the 1-based numbers of lines it could not read; it never reports line contents,
// which may be secrets.
func parseDotenv(data []byte) (map[string]string, []int) {
	vars := map[string]string{}
	var bad []int
	text := strings.TrimPrefix(string(data), "\uFEFF")
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			line = strings.TrimSpace(rest)
		}
		key, raw, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !varName.MatchString(key) {
			bad = append(bad, n+1)
			continue
		}
		value, ok := dotenvValue(strings.TrimSpace(raw))
		if !ok {
			bad = append(bad, n+1)
			continue
		}
		vars[key] = value
	}
	return vars, bad
}

// dotenvValue decodes the right-hand side of one dotenv line.
func dotenvValue(raw string) (string, bool) {
	if raw == "" {
		return "", true
	}
	var value, rest string
	switch raw[0] {
	case '\'':
		end := strings.IndexByte(raw[1:], '\'')
		if end < 0 {
			return "", false
		}
		value, rest = raw[1:1+end], raw[2+end:]
	case '"':
		var b strings.Builder
		i := 1
		for ; i < len(raw) && raw[i] != '"'; i++ {
			if raw[i] == '\\' && i+1 < len(raw) {
				i++
				switch raw[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				case '"', '\\':
					b.WriteByte(raw[i])
				default:
					b.WriteByte('\\')
					b.WriteByte(raw[i])
				}
				continue
			}
			b.WriteByte(raw[i])
		}
		if i >= len(raw) {
			return "", false
		}
		value, rest = b.String(), raw[i+1:]
	default:
		if i := strings.Index(raw, " #"); i >= 0 {
			raw = raw[:i]
		}
		if i := strings.Index(raw, "\t#"); i >= 0 {
			raw = raw[:i]
		}
		return strings.TrimSpace(raw), true
	}
	rest = strings.TrimSpace(rest)
	return value, rest == "" || strings.HasPrefix(rest, "#")
}
