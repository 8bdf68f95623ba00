package proxy

import "sync"

// firstLoad keeps the first load of the catalog from being announced to
// sessions that have not seen a tool list yet. A client that connects while
// the upstreams start lists its tools, and tools/list waits for the first
// load; a tools/list_changed on top of that list makes clients register
// every tool twice (Gemini CLI prints a line per tool). So until the first
// load is done, only sessions that were sent a tool list, which may have
// missed tools, hear that the list changed; after it, every session does.
//
// initialize and server/discover do not wait for it: while it runs they
// offer every list the aggregator serves (Proxy.offerable), since what they
// offer is what the client goes by for the rest of the session.
type firstLoad struct {
	mu     sync.Mutex
	done   bool
	listed map[string]bool // session keys sent a tool list during the first load
}

// sawList records that the session with key is being sent the tool list.
// Call it before reading the catalog, so a commit that publishes after the
// read finds the session marked.
func (f *firstLoad) sawList(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if f.listed == nil {
		f.listed = map[string]bool{}
	}
	f.listed[key] = true
}

// finish ends the first load: from now on every session is told.
func (f *firstLoad) finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done, f.listed = true, nil
}

// notifies reports whether the session with key is told of a tool list change.
func (f *firstLoad) notifies(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done || f.listed[key]
}

// forget drops a closed session.
func (f *firstLoad) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.listed, key)
}
