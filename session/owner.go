package session

import "context"

// ownerKey is the context key of WithOwner.
type ownerKey struct{}

// WithOwner returns ctx saying that the call acquiring a lease with it is
// made by owner: the lease keeps the owner its latest call named, which
// Revoke gives back, so that who decides which leases to end can judge a
// lease by who holds it now (a caller's claims, the view it came to),
// more than its key tells. The pool never looks inside owner.
func WithOwner(ctx context.Context, owner any) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerOf is the owner WithOwner put on ctx; nil if none.
func ownerOf(ctx context.Context) any { return ctx.Value(ownerKey{}) }
