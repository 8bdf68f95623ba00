package ops

import (
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/proxy"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// Snapshot is what /status.json answers and /status shows: the whole
// gateway at one moment, free of secrets.
type Snapshot struct {
	Generated time.Time `json:"generatedAt"`
	Version   string    `json:"version"` // of the binary
	Started   time.Time `json:"startedAt"`
	Uptime    string    `json:"uptime"`
	Ready     bool      `json:"ready"`
	NotReady  []string  `json:"notReady"`
	// Draining is set once the replica drains: it refuses new sessions.
	Draining        bool     `json:"draining"`
	RegistryVersion uint64   `json:"registryVersion"`
	Sessions        int      `json:"sessions"`
	Supervision     string   `json:"supervision,omitempty"`
	Tools           int      `json:"tools"` // exported, admin tools included
	Servers         []Server `json:"servers"`
	// Instances are every upstream instance; leased ones name their
	// session by a digest.
	Instances []proxy.InstanceStatus `json:"instances"`
	Problems  []string               `json:"problems"`
	Reloads   []Reload               `json:"reloads"`
}

// Server is one server's line of the status.
type Server struct {
	proxy.ServerStatus
	// State sums up Health: ok, down (restarting) or failed (not running).
	State    string `json:"state"`
	Required bool   `json:"required,omitempty"`
}

// Server states.
const (
	stateOK     = "ok"
	stateDown   = "down"
	stateFailed = "failed"
)

// Reload is one recent reload.
type Reload struct {
	proxy.Reload
	DurationMS int64 `json:"durationMs"`
}

// snapshot builds the status from the proxy's state now.
func (o *Ops) snapshot() Snapshot {
	now := time.Now()
	st := o.proxy.Status(session.Key{})
	ready, notReady := o.readiness()
	s := Snapshot{Draining: o.draining(), Generated: now.UTC(), Version: o.opts.Version, Started: o.started.UTC(),
		Uptime: now.Sub(o.started).Round(time.Second).String(), Ready: ready, NotReady: o.scrubAll(notReady),
		RegistryVersion: st.Version, Sessions: o.proxy.Sessions(), Supervision: st.Supervision,
		Tools: o.proxy.Catalog().Len(), Servers: make([]Server, 0, len(st.Servers)), Instances: st.Instances,
		Problems: o.scrubAll(st.Problems), Reloads: []Reload{}}
	if s.NotReady == nil {
		s.NotReady = []string{}
	}
	required := map[string]bool{}
	for _, id := range o.proxy.Required() {
		required[id] = true
	}
	for _, ss := range st.Servers {
		ss.Health = o.scrub(ss.Health)
		s.Servers = append(s.Servers, Server{ServerStatus: ss, State: serverState(ss.Health), Required: required[ss.ID]})
	}
	for _, rl := range o.rec.Reloads() {
		rl.Errors = o.scrubAll(rl.Errors)
		s.Reloads = append(s.Reloads, Reload{Reload: rl, DurationMS: rl.Duration.Milliseconds()})
	}
	return s
}

// serverState sums up a health line of proxy.ServerStatus.
func serverState(health string) string {
	switch {
	case health == "ok":
		return stateOK
	case strings.HasPrefix(health, "failed"):
		return stateFailed
	}
	return stateDown
}

func (o *Ops) scrub(s string) string {
	if o.opts.Secrets == nil {
		return s
	}
	return o.opts.Secrets.String(s)
}

func (o *Ops) scrubAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = o.scrub(s)
	}
	return out
}
