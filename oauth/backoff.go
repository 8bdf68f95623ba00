package oauth

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A refresh that fails for any reason but a refusal (the endpoint is down,
// overloaded, unreachable) is not tried again by every call that needs a
// token: the credential waits, refreshBackoffMin after the first failure,
// twice as long after each further one, up to refreshBackoffMax, or as long
// as the endpoint's Retry-After asks when that is longer (up to
// maxRetryAfter, so that a wild value cannot stop refreshes for days).
const (
	refreshBackoffMin = time.Second
	refreshBackoffMax = 5 * time.Minute
	maxRetryAfter     = time.Hour
)

// refreshBackoff is the wait after failures failed refreshes in a row.
func refreshBackoff(failures int) time.Duration {
	d := refreshBackoffMin
	for i := 1; i < failures && d < refreshBackoffMax; i++ {
		d *= 2
	}
	return min(d, refreshBackoffMax)
}

// retryAfterError is a failed refresh whose answer said when to try again.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// parseRetryAfter reads an HTTP Retry-After value (RFC 9110 §10.2.3),
// delay-seconds or an HTTP-date, as a wait from now; 0 if there is none
// or it cannot be read.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// backoffError is a call refused without asking the token endpoint, since
// the last refresh failed a moment ago.
type backoffError struct {
	err   error // the last refresh's failure
	until time.Time
	now   time.Time
}

func (e *backoffError) Error() string {
	return fmt.Sprintf("%v (the token endpoint is asked again in %s)", e.err, e.until.Sub(e.now).Round(time.Second))
}

func (e *backoffError) Unwrap() error { return e.err }

// failed records a failed refresh of held and sets when the next may be
// tried; callers do not hold c.mu.
func (c *credential) failed(held *Grant, err error) {
	now := c.k.opts.Now()
	c.mu.Lock()
	if c.grant != held { // a new login replaced it meanwhile
		c.mu.Unlock()
		return
	}
	c.failures++
	wait := refreshBackoff(c.failures)
	var ra *retryAfterError
	if errors.As(err, &ra) && ra.after > wait {
		wait = min(ra.after, maxRetryAfter)
	}
	c.retryAt, c.failure = now.Add(wait), err
	c.mu.Unlock()
	c.k.log.Warn("could not refresh OAuth tokens; trying again later", "servers", c.ids(), "err", err, "retry_in", wait.String())
}

// recovered forgets the failures; callers hold c.mu.
func (c *credential) recovered() {
	c.failures, c.retryAt, c.failure = 0, time.Time{}, nil
}
