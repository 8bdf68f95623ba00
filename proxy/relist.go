package proxy

import (
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// relists coalesces the work an upstream's notifications/tools/list_changed
// triggers: per server at most one relist runs and at most one waits, however
// many notifications arrive, so a flooding upstream costs one goroutine and a
// bounded number of relists.
type relists struct {
	mu    sync.Mutex
	state map[string]*relistState
}

type relistState struct {
	running bool
	pending bool
	from    *upstream.Instance // the instance that asked most recently
}

func (r *relists) init() { r.state = map[string]*relistState{} }

// request schedules a relist of server from inst; run does the work.
func (r *relists) request(server string, inst *upstream.Instance, run func(*upstream.Instance)) {
	r.mu.Lock()
	st := r.state[server]
	if st == nil {
		st = &relistState{}
		r.state[server] = st
	}
	if st.running {
		st.pending, st.from = true, inst
		r.mu.Unlock()
		return
	}
	st.running = true
	r.mu.Unlock()
	go func() {
		for {
			run(inst)
			r.mu.Lock()
			if !st.pending {
				st.running = false
				delete(r.state, server)
				r.mu.Unlock()
				return
			}
			inst, st.pending, st.from = st.from, false, nil
			r.mu.Unlock()
		}
	}()
}
