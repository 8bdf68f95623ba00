package integration

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveLoggedIn starts the aggregator on cfg with env (loggedInSecured's),
// loaded, and an initialized session of it.
func serveLoggedIn(t *testing.T, cfg string, env []string) (*aggregator, *client) {
	t.Helper()
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg}, env: env})
	a.waitLoaded()
	c := a.newClient()
	c.initialize()
	return a, c
}

// TestOAuthRefreshBacksOff: while the provider's token endpoint answers
// 503, the calls that need a new token do not each send a refresh. Without
// Retry-After the attempts back off exponentially from a second; with
// Retry-After the next attempt waits that long, however many calls come,
// one after another or at once. A new login starts over.
func TestOAuthRefreshBacksOff(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	up, home, env, cfg := loggedInSecured(t, as)
	a, c := serveLoggedIn(t, cfg, env)
	require.Equal(t, oauthSubject, firstText(t, c.callToolResult("whoami", map[string]any{})))
	refreshes := func() int { return len(as.store.notesOf("refresh_token")) }
	failingCall := func() {
		resp := c.callTool("whoami", map[string]any{})
		assert.Contains(t, string(resp.Error)+string(resp.Result), "HTTP 503", "the call says why it failed")
	}

	// No Retry-After: attempts at 0s, 1s, 3s, 7s... of the failures.
	as.failToken.Store(true)
	start := time.Now()
	up.reject(up.lastToken())
	for range 50 {
		failingCall()
	}
	elapsed := time.Since(start)
	bound := int(math.Log2(elapsed.Seconds()+1)) + 1
	assert.LessOrEqual(t, refreshes(), bound, "50 sequential calls in %s while the endpoint fails", elapsed)
	assert.GreaterOrEqual(t, refreshes(), 1)

	// A new login replaces the grant and forgets the failures.
	as.failToken.Store(false)
	const noticed = "a stored OAuth login changed"
	before := strings.Count(a.log.String(), noticed)
	mustLogin(t, env, cfg)
	_, ok := a.log.waitLine(func(string) bool { return strings.Count(a.log.String(), noticed) > before }, startTimeout, a.exited)
	require.True(t, ok, "the aggregator did not notice the login:\n%s", a.log)
	require.Equal(t, oauthSubject, firstText(t, c.callToolResult("whoami", map[string]any{})))

	// Retry-After: an hour. One attempt, then none, for calls in sequence
	// and at once.
	as.tokenRetryAfter.Store("3600")
	as.failToken.Store(true)
	was := refreshes()
	up.reject(up.lastToken())
	for range 50 {
		failingCall()
	}
	assert.Equal(t, was+1, refreshes(), "50 sequential calls while the endpoint asks for an hour")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				failingCall()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, was+1, refreshes(), "4 workers × 25 calls while the endpoint asks for an hour")
	assert.True(t, a.log.containsLine("retry_in=1h0m0s"), "the log says when the next attempt is:\n%s", a.log)

	g := onlyGrant(t, home)
	assert.NotContains(t, a.log.String(), g.RefreshToken, "the refresh token is in the log")
}

// TestOAuthShortLivedToken: tokens that expire a second after they are
// issued are not refreshed on every call; a hundred calls share a few.
func TestOAuthShortLivedToken(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	as.store.mu.Lock()
	as.store.lifetime = 2 * time.Second // the token response says expires_in: 1
	as.store.mu.Unlock()
	_, _, env, cfg := loggedInSecured(t, as)
	_, c := serveLoggedIn(t, cfg, env)
	was := len(as.store.notesOf("refresh_token"))
	start := time.Now()
	for range 100 {
		assert.Equal(t, oauthSubject, firstText(t, c.callToolResult("whoami", map[string]any{})))
	}
	elapsed := time.Since(start)
	// A token is used for the first half of its second, then refreshed:
	// refreshes start at least half a second apart (one more for slack).
	bound := int(elapsed/(500*time.Millisecond)) + 2
	got := len(as.store.notesOf("refresh_token")) - was
	assert.LessOrEqual(t, got, bound, "refreshes over 100 calls in %s", elapsed)
	t.Logf("%d refreshes over 100 calls in %s", got, elapsed)
}
