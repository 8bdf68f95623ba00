package oauth

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setDown makes the rig's token endpoint answer 503, with Retry-After
// retryAfter unless it is empty, or work again.
func (r *keyringRig) setDown(down bool, retryAfter string) {
	r.te.mu.Lock()
	defer r.te.mu.Unlock()
	r.te.down, r.te.retryAfter = down, retryAfter
}

// advance moves the rig's clock on by d.
func (r *keyringRig) advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

// While the token endpoint fails, a failed refresh is not repeated by every
// call that follows: the next attempt waits, longer after each failure
// (1s, 2s, 4s, ...), and the calls meanwhile fail at once.
func TestKeyringBacksOffAfterAFailedRefresh(t *testing.T) {
	r := newKeyringRig(t, true)
	r.setDown(true, "")
	for range 50 {
		_, err := r.token(t, "")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "HTTP 503")
	}
	assert.Equal(t, 1, r.te.refreshes(), "50 sequential calls while the endpoint fails")

	r.tokensAtOnce(t, 4, 25)
	assert.Equal(t, 1, r.te.refreshes(), "4 workers × 25 calls within the backoff")

	r.advance(time.Second) // the first wait is over
	_, err := r.token(t, "")
	require.Error(t, err)
	assert.Equal(t, 2, r.te.refreshes())
	r.advance(time.Second) // the second wait is twice as long
	_, err = r.token(t, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 503")
	assert.Equal(t, 2, r.te.refreshes(), "the second wait is 2s")
	r.advance(time.Second)
	_, _ = r.token(t, "")
	assert.Equal(t, 3, r.te.refreshes())

	for range 20 { // the wait stops growing at its cap
		r.advance(refreshBackoffMax)
		_, _ = r.token(t, "")
	}
	assert.Equal(t, 23, r.te.refreshes(), "one attempt per capped wait")

	r.setDown(false, "")
	r.advance(refreshBackoffMax)
	tok, err := r.token(t, "")
	require.NoError(t, err)
	assert.Equal(t, "access-x", tok)
	r.setDown(true, "")
	_, err = r.token(t, "access-x")
	require.Error(t, err)
	r.advance(time.Second)
	_, _ = r.token(t, "access-x")
	assert.Equal(t, 26, r.te.refreshes(), "a success starts the backoff over at 1s")
}

// Retry-After sets the wait when it asks for more than the backoff.
func TestKeyringHonoursRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name, header string
	}{
		{"seconds", "120"},
		{"date", time.Date(2030, 1, 1, 0, 2, 0, 0, time.UTC).Format(http.TimeFormat)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newKeyringRig(t, true) // its clock stands at 2030-01-01 00:00
			r.setDown(true, tt.header)
			_, err := r.token(t, "")
			require.Error(t, err)
			r.advance(119 * time.Second)
			_, err = r.token(t, "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "HTTP 503")
			assert.Equal(t, 1, r.te.refreshes(), "no attempt before Retry-After")
			r.setDown(false, "")
			r.advance(time.Second)
			tok, err := r.token(t, "")
			require.NoError(t, err)
			assert.Equal(t, "access-x", tok)
			assert.Equal(t, 2, r.te.refreshes())
		})
	}
}

// A token about to expire keeps serving while its refresh fails, until it
// really expires.
func TestKeyringKeepsAnExpiringTokenWhileRefreshFails(t *testing.T) {
	r := newKeyringRig(t, false) // access-1 expires in an hour
	r.setDown(true, "")
	r.advance(time.Hour - 30*time.Second) // within a minute of expiry
	for range 10 {
		tok, err := r.token(t, "")
		require.NoError(t, err)
		assert.Equal(t, "access-1", tok)
	}
	assert.Equal(t, 1, r.te.refreshes())
	r.advance(30 * time.Second) // expired, and past the backoff
	_, err := r.token(t, "")
	require.Error(t, err)
	assert.Equal(t, 2, r.te.refreshes())
}

// A token issued for one second is refreshed once, not on every call:
// calls in its lifetime share it.
func TestKeyringShortLivedTokenRefreshedOnce(t *testing.T) {
	r := newKeyringRig(t, true)
	r.te.mu.Lock()
	r.te.expiresIn = "1"
	r.te.mu.Unlock()
	for range 100 {
		tok, err := r.token(t, "")
		require.NoError(t, err)
		assert.Equal(t, "access-x", tok)
	}
	assert.Equal(t, 1, r.te.refreshes(), "100 calls within the token's first half second")
	r.advance(600 * time.Millisecond) // into the last part of its life
	r.tokensAtOnce(t, 4, 25)
	assert.Equal(t, 2, r.te.refreshes(), "the calls in the window share one refresh")
}

// tokensAtOnce asks for a token calls times on each of workers goroutines
// at once, and returns when all have their answers, whatever they are.
func (r *keyringRig) tokensAtOnce(t *testing.T, workers, calls int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				_, _ = r.token(t, "")
			}
		}()
	}
	wg.Wait()
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"30", 30 * time.Second},
		{" 7 ", 7 * time.Second},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"99999999999999999999", 0},
	} {
		assert.Equal(t, tt.want, parseRetryAfter(tt.header, now), "%q", tt.header)
	}
}
