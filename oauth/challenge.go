package oauth

import "strings"

// challenge is one challenge of a WWW-Authenticate header (RFC 9110 §11.6.1).
type challenge struct {
	scheme string            // lower case
	params map[string]string // names in lower case
}

// maxChallengeHeader bounds the WWW-Authenticate text that is parsed.
const maxChallengeHeader = 16 << 10

// parseChallenges reads WWW-Authenticate header values. It is lenient: a
// challenge it cannot read ends the parse of its header value, and what
// was read before stays.
func parseChallenges(values []string) []challenge {
	var out []challenge
	total := 0
	for _, v := range values {
		total += len(v)
		if total > maxChallengeHeader {
			break
		}
		out = append(out, parseChallengeValue(v)...)
	}
	return out
}

// parseChallengeValue reads one header value: a list of challenges, each a
// scheme then auth-params (name=token or name="quoted string"), or a
// token68, all separated by commas.
func parseChallengeValue(s string) []challenge {
	var out []challenge
	var cur *challenge
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return out
		}
		name := s[:tokenEnd(s)]
		if name == "" {
			return out // not a token: stop here
		}
		rest := strings.TrimLeft(s[len(name):], " \t")
		if strings.HasPrefix(rest, "=") && cur != nil && !strings.HasPrefix(rest, "==") {
			// An auth-param of the current challenge.
			value, after, ok := paramValue(strings.TrimLeft(rest[1:], " \t"))
			if !ok {
				return out
			}
			if _, dup := cur.params[strings.ToLower(name)]; !dup {
				cur.params[strings.ToLower(name)] = value
			}
			s = after
			continue
		}
		// A new challenge: the scheme, then maybe a token68.
		out = append(out, challenge{scheme: strings.ToLower(name), params: map[string]string{}})
		cur = &out[len(out)-1]
		s = rest
		if !isParamStart(s) {
			s = s[token68End(s):] // a token68, not used
		}
	}
}

// isParamStart reports whether s begins with name= (an auth-param rather
// than a token68 ending in padding).
func isParamStart(s string) bool {
	n := tokenEnd(s)
	if n == 0 {
		return false
	}
	rest := strings.TrimLeft(s[n:], " \t")
	return strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, "==") && strings.TrimLeft(rest[1:], " \t") != ""
}

// paramValue reads a token or a quoted string and returns it with what
// follows.
func paramValue(s string) (value, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		n := tokenEnd(s)
		if n == 0 {
			return "", s, false
		}
		return s[:n], s[n:], true
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false // unterminated
}

// tokenEnd is the length of the RFC 9110 token at the start of s.
func tokenEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return i
	}
	return len(s)
}

// token68End is the length of the token68 at the start of s.
func token68End(s string) int {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0 {
			i++
			continue
		}
		break
	}
	for i < len(s) && s[i] == '=' {
		i++
	}
	return i
}

// bearerParam is the value of param in the first Bearer challenge that
// has it.
func bearerParam(cs []challenge, param string) string {
	for _, c := range cs {
		if c.scheme == "bearer" && c.params[param] != "" {
			return c.params[param]
		}
	}
	return ""
}
