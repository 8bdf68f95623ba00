package proxy

import (
	"context"
	"sync"
)

// subscriptionOrder gives turns, one at a time per server and URI, to
// whoever decides whether a server's shared instance is to be subscribed
// to a URI and tells it so. A session's resources/subscribe and another's
// last resources/unsubscribe otherwise cross: the unsubscribe, decided
// while no one else held the URI, can reach the upstream after the
// subscribe, and the instance stays unsubscribed while a session holds the
// URI. With the decision and the upstream's answer inside one turn, the
// upstream's last word on a URI is the one that matches who holds it.
//
// A turn is not a lock on shared state: it orders messages to one URI of
// one server, and a taker waits for it only as long as its context lets it.
type subscriptionOrder struct {
	mu    sync.Mutex
	turns map[string]*subscriptionTurn // server+"\x00"+uri; only while taken or awaited
	// onWait, when set, is told of each taker that has to wait for a turn
	// another holds.
	onWait func(server, uri string)
}

// subscriptionTurn is one server and URI's turn.
type subscriptionTurn struct {
	token chan struct{} // holds a value while someone has the turn
	users int           // who has or awaits the turn
}

// take waits for the turn of server's uri and returns the function that
// gives it back, or ctx's error if ctx ends first.
func (o *subscriptionOrder) take(ctx context.Context, server, uri string) (func(), error) {
	k := server + "\x00" + uri
	o.mu.Lock()
	if o.turns == nil {
		o.turns = map[string]*subscriptionTurn{}
	}
	t := o.turns[k]
	if t == nil {
		t = &subscriptionTurn{token: make(chan struct{}, 1)}
		o.turns[k] = t
	}
	t.users++
	onWait := o.onWait
	o.mu.Unlock()
	select {
	case t.token <- struct{}{}:
		return func() { <-t.token; o.leave(k, t) }, nil
	default:
	}
	if onWait != nil {
		onWait(server, uri)
	}
	select {
	case t.token <- struct{}{}:
		return func() { <-t.token; o.leave(k, t) }, nil
	case <-ctx.Done():
		o.leave(k, t)
		return nil, context.Cause(ctx)
	}
}

// leave forgets t once no one has or awaits it.
func (o *subscriptionOrder) leave(k string, t *subscriptionTurn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(o.turns, k)
	}
}
