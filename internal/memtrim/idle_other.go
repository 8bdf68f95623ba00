//go:build !unix

package memtrim

import "context"

// WhenIdle returns when ctx ends: outside Unix the process's CPU time is
// not read.
func WhenIdle(ctx context.Context) { <-ctx.Done() }
