package auth

import (
	"net/http"
	"strings"
)

// maxTokenBytes bounds a bearer token. Real access tokens stay under a few
// kilobytes; anything longer is refused before it is parsed.
const maxTokenBytes = 16 << 10

// bearerToken returns the token of an Authorization header of the Bearer
// scheme (RFC 6750 §2.1; the scheme name is case-insensitive). ok is false
// when there is no such header (or one of another scheme); malformed
// reports a Bearer header that is unusable (two Authorization headers, no
// token, a token with characters outside the token68 set, or too long).
func bearerToken(h http.Header) (token string, ok, malformed bool) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", false, false
	case 1:
	default:
		return "", false, true
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, false // another scheme: no credentials of ours
	}
	token = strings.TrimLeft(rest, " ")
	if token == "" || len(token) > maxTokenBytes || !token68(token) {
		return "", false, true
	}
	return token, true, false
}

// token68 reports whether s is a token68 (RFC 7235 §2.1): ALPHA, DIGIT,
// "-" "." "_" "~" "+" "/", then any number of "=".
func token68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
