package config

import (
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Rate is a rate limit: calls per second, with a burst of calls allowed at
// once. The zero Rate does not limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// RateLimits limit each principal's tool calls: Calls all its calls
// together, Servers its calls to one server each.
type RateLimits struct {
	Calls   Rate
	Servers map[string]Rate
	// Lines are where the servers are named, for checkRateLimits.
	lines map[string]int
}

// readRateLimits reads the top-level rate_limits mapping.
func readRateLimits(r *reader, n *yaml.Node) RateLimits {
	const want = "calls: {per_second: N, burst: N}, servers: {ID: {per_second: N, burst: N}}"
	var out RateLimits
	if isNull(n) || !r.mapping(n, "rate_limits", want) {
		return out
	}
	f := r.fields(n, "rate_limits.", "calls", "servers")
	if p, ok := f["calls"]; ok {
		out.Calls = readRate(r, p.v, "rate_limits.calls")
	}
	if p, ok := f["servers"]; ok && !isNull(p.v) && r.mapping(p.v, "rate_limits.servers", "ID: {per_second: N, burst: N}") {
		own, merged := mappingPairs(p.v)
		out.Servers = map[string]Rate{}
		out.lines = map[string]int{}
		for _, s := range append(own, merged...) {
			if _, dup := out.Servers[s.key]; dup {
				continue
			}
			out.Servers[s.key] = readRate(r, s.v, "rate_limits.servers."+s.key)
			out.lines[s.key] = s.k.Line
		}
	}
	return out
}

// readRate reads {per_second: N, burst: N}; burst defaults to the rate
// rounded up, and at least 1.
func readRate(r *reader, n *yaml.Node, field string) Rate {
	var rt Rate
	if isNull(n) || !r.mapping(n, field, "per_second: N, burst: N") {
		return rt
	}
	f := r.fields(n, field+".", "per_second", "burst")
	p, ok := f["per_second"]
	if !ok {
		r.errorf(n.Line, field+".per_second", "required: how many calls a second each principal may make (e.g. 5, or 0.5 for one every two seconds)")
		return rt
	}
	t, ok := r.text(p.v, field+".per_second")
	if !ok {
		return rt
	}
	v, err := strconv.ParseFloat(t.s, 64)
	if err != nil || v <= 0 || v > 1e6 {
		r.errorf(p.v.Line, field+".per_second", "%s is not a rate; write a number of calls a second above 0 (e.g. 5, or 0.5)", t.quoted())
		return rt
	}
	rt.PerSecond = v
	rt.Burst = int(v)
	if float64(rt.Burst) < v {
		rt.Burst++
	}
	if b, ok := f["burst"]; ok {
		if n, good := r.count(b.v, field+".burst"); good {
			if n == 0 {
				r.errorf(b.v.Line, field+".burst", "0 lets no call through; write 1 or more")
			} else {
				rt.Burst = n
			}
		}
	}
	return rt
}

// checkRateLimits checks that every server rate_limits names is defined.
func checkRateLimits(ws *Workspace, file string) []Problem {
	var out []Problem
	known := map[string]bool{}
	for _, s := range ws.Servers {
		known[s.ID] = true
	}
	for _, id := range ws.Rejected {
		known[id] = true
	}
	for id := range ws.RateLimits.Servers {
		if !known[id] {
			out = append(out, Problem{Severity: SeverityError, File: file, Line: ws.RateLimits.lines[id], Field: "rate_limits.servers." + id,
				Message: fmt.Sprintf("no server %q is defined; name a server of the config", id)})
		}
	}
	return out
}
