package session

import "context"

// ownerKey is the context key of withOwner.
type ownerKey struct{}

// withOwner returns ctx saying that the call acquiring a lease with it is
// made by owner (Claim.Owner), for the start of a lease that may come.
func withOwner(ctx context.Context, owner any) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerOf is the owner withOwner put on ctx; nil if none.
func ownerOf(ctx context.Context) any { return ctx.Value(ownerKey{}) }
