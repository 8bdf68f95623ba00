package oauth

import (
	"context"
	"errors"
	"sync"
)

// Refreshes are the token refreshes under way in a process, which it lets
// end before it exits: an authorization server that rotates refresh tokens
// takes the old one back as it answers, so an answer lost at exit leaves
// only a spent refresh token stored, and the next start needs a new login.
// A Keyring and UserLogins given the same Refreshes close together. It is
// safe for concurrent use.
type Refreshes struct {
	mu sync.Mutex
	// closing ends when Close begins: no refresh starts, or is sent, after
	// it. under counts the refreshes under way; one is added only under mu,
	// before closing ends, so that none is added while Close waits.
	closing context.Context
	close   context.CancelFunc
	under   sync.WaitGroup
}

// NewRefreshes returns Refreshes that are not closed.
func NewRefreshes() *Refreshes {
	r := &Refreshes{}
	r.closing, r.close = context.WithCancel(context.Background())
	return r
}

// errClosed is a refresh not made because the process is shutting down.
var errClosed = errors.New("the OAuth tokens are not refreshed: the aggregator is shutting down")

// start counts a refresh about to start and reports true, unless Close has
// begun; done is called when it has ended, its tokens stored.
func (r *Refreshes) start() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing.Err() != nil {
		return false
	}
	r.under.Add(1)
	return true
}

func (r *Refreshes) done() { r.under.Done() }

// closed reports whether Close has begun: a refresh not yet sent is then
// not sent.
func (r *Refreshes) closed() bool { return r.closing.Err() != nil }

// Close ends the refreshes before the process exits: none starts after it
// (a call whose token is no longer good fails), one not yet sent to the
// token endpoint is not sent, and Close waits until those already sent
// have their answers stored, or ctx ends, whose error it then returns. A
// refresh ends within RefreshTimeout.
func (r *Refreshes) Close(ctx context.Context) error {
	r.mu.Lock()
	r.close()
	r.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		r.under.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
