package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"sort"
)

// staticTokens are the tokens of http.auth.tokens, as digests: comparing
// fixed-length digests in constant time tells nothing about a token's
// length or its first differing byte.
type staticTokens struct {
	clients []string // sorted, so a lookup's work does not depend on map order
	digests [][sha256.Size]byte
}

func newStaticTokens(tokens map[string]string) *staticTokens {
	s := &staticTokens{}
	for client := range tokens {
		s.clients = append(s.clients, client)
	}
	sort.Strings(s.clients)
	for _, client := range s.clients {
		s.digests = append(s.digests, sha256.Sum256([]byte(tokens[client])))
	}
	return s
}

// lookup returns the client whose token is token. Every token is compared,
// whether or not one matched already.
func (s *staticTokens) lookup(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.digests {
		if subtle.ConstantTimeCompare(d[:], s.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return s.clients[found], true
}

// has reports whether client is the name of a static token's client.
func (s *staticTokens) has(client string) bool {
	i := sort.SearchStrings(s.clients, client)
	return i < len(s.clients) && s.clients[i] == client
}

func (s *staticTokens) len() int { return len(s.clients) }
