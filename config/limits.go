package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Default caps on upstream instances. Leaked upstream processes are the
// most painful failure of a gateway, so both caps are finite unless a
// config says otherwise.
const (
	// DefaultMaxInstances caps the instances of all servers together
	// (limits.max_instances).
	DefaultMaxInstances = 256
	// DefaultLeaseMaxInstances caps the instances of one stateful server
	// (lease.max_instances).
	DefaultLeaseMaxInstances = 16
)

// DefaultCacheMaxBytes bounds the result cache unless cache.max_bytes
// says otherwise.
const DefaultCacheMaxBytes = 64 << 20

// limitKeys are the keys of the limits section.
var limitKeys = []string{"max_concurrent", "max_instances", "max_rss"}

// readLimits reads the limits section.
func readLimits(r *reader, f map[string]pair, s *settings) {
	if p, ok := f["max_concurrent"]; ok {
		if v, ok := r.count(p.v, "limits.max_concurrent"); ok {
			s.maxConcurrent = &v
		}
	}
	if p, ok := f["max_instances"]; ok {
		if v, ok := r.count(p.v, "limits.max_instances"); ok {
			s.maxInstances = &v
		}
	}
	if p, ok := f["max_rss"]; ok {
		if v, ok := r.size(p.v, "limits.max_rss"); ok {
			s.maxRSS = &v
		}
	}
}

// size reads a byte count: a whole number, or one with a unit.
func (r *reader) size(n *yaml.Node, field string) (int64, bool) {
	t, ok := r.text(n, field)
	if !ok {
		return 0, false
	}
	v, err := ParseSize(t.s)
	if err != nil {
		r.errorf(n.Line, field, "%s is not a size (%v); write bytes (0 means no limit) or a number with a unit, e.g. 512MiB or 2GB", t.quoted(), err)
		return 0, false
	}
	return v, true
}

// sizeUnits are the multipliers ParseSize accepts. K, M and G alone are
// powers of 1024, as in Docker and Kubernetes' binary suffixes.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1000,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1000 * 1000,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1000 * 1000 * 1000,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1000 * 1000 * 1000 * 1000,
}

// ParseSize reads a byte count such as "1048576", "512MiB", "1.5G" or
// "2GB": KiB, MiB, GiB and TiB (and K, M, G, T) are powers of 1024; KB, MB,
// GB and TB powers of 1000. Units are case-insensitive.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("no number")
	}
	num, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s[:i])
	}
	unit := strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q; use B, KiB, MiB, GiB, KB, MB or GB", s[i:])
	}
	v := num * float64(mult)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("too large")
	}
	return int64(v), nil
}
