// Package memtrim gives back memory a process holds only because of its
// start: the heap its initialisation left free, and the pages of the
// binary (and of the C library) that the initialisation of every package
// touched, which count in the process's resident set although they are
// the page cache's, shared with every other process of the same binary.
// The aggregator calls it once its first load is done, the reaper once it
// has started.
package memtrim
