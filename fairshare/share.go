package fairshare

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// ErrShareReached is wrapped by every refusal of a client at its share.
var ErrShareReached = errors.New("client share reached")

// Of names who a request's holdings count against: the authenticated
// client (an http.auth token's key, an OAuth client), else the address the
// connection came from. The two never collide: a client's name is quoted.
// Both empty (stdio: the local user alone) name no one, and no share
// applies.
func Of(client, remoteAddr string) string {
	if client != "" {
		return "client " + strconv.Quote(client)
	}
	if remoteAddr == "" {
		return ""
	}
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return "address " + host
	}
	return "address " + remoteAddr
}

// Shares counts, per holder (see Of), the places it holds of one capacity,
// and refuses a holder at Max. The zero value has no cap. Safe for
// concurrent use.
type Shares struct {
	// What names a place in refusals ("open sessions", "tasks").
	What string
	// Setting names the setting that sets Max, for refusals.
	Setting string
	// Frees says what gives a place back, for refusals.
	Frees string

	mu   sync.Mutex
	max  int // 0: no cap
	held map[string]int
}

// SetMax replaces the cap (0 or less: none). Places already held stay held.
func (s *Shares) SetMax(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = max(n, 0)
}

// Max is the cap in force (0: none).
func (s *Shares) Max() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// Take takes one place for holder, or refuses with an error wrapping
// ErrShareReached that names the holder, the cap, its setting and what
// frees a place. Every successful Take is matched by one Give.
func (s *Shares) Take(holder string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]int{}
	}
	if holder != "" && s.max > 0 && s.held[holder] >= s.max {
		return fmt.Errorf("%w: %s holds its maximum of %d %s (%s), the most one client may hold so that others are still served; %s, or an operator can raise %s",
			ErrShareReached, holder, s.max, s.What, s.Setting, s.Frees, s.Setting)
	}
	s.held[holder]++
	return nil
}

// Give gives back a place Take took.
func (s *Shares) Give(holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[holder]--; s.held[holder] <= 0 {
		delete(s.held, holder)
	}
}

// Full reports whether Take would refuse holder now.
func (s *Shares) Full(holder string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return holder != "" && s.max > 0 && s.held[holder] >= s.max
}

// Held is how many places holder holds.
func (s *Shares) Held(holder string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[holder]
}
