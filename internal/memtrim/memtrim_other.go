//go:build !linux

package memtrim

import "runtime/debug"

// Trim returns the heap's free memory to the system; outside Linux the
// mapped pages of files are left as they are.
func Trim() { debug.FreeOSMemory() }
