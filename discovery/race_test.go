//go:build race

package discovery

// raceEnabled: the race detector slows everything down many times, so the
// latency targets are checked only without it.
const raceEnabled = true
