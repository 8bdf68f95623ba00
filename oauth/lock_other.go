//go:build !unix

package oauth

import "context"

// lockFile is a no-op where flock is not available: aggregators sharing a
// store may then refresh at the same time, and the one that loses takes
// the winner's grant from the store (see credential.refresh).
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }
