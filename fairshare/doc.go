// Package fairshare keeps one client of a shared gateway from taking all of
// a capacity its clients share (open sessions, the task table, a server's
// leased instances, the slots of calls in flight): it counts what each
// client holds and refuses, or makes wait, the one that holds its share,
// while the others are still served.
package fairshare
