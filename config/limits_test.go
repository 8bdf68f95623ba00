package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInstanceCapsHaveFiniteDefaults(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nservers:\n  s:\n    command: npx\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, DefaultMaxInstances, ws.Limits.MaxInstances)
	assert.Zero(t, ws.Limits.MaxRSS, "no RSS limit unless asked for")
	assert.Equal(t, Lease{MaxInstances: DefaultLeaseMaxInstances}, ws.Servers[0].Lease)
	assert.Equal(t, DefaultMaxInstances, Empty().Limits.MaxInstances, "an absent config has the same caps")
}

func TestCacheMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int64
	}{
		{"default", "", DefaultCacheMaxBytes},
		{"a size", "cache: {max_bytes: 16MiB}\n", 16 << 20},
		{"off", "cache: {max_bytes: 0}\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, problems := loadYAML(t, "version: 1\n"+tc.text+"servers:\n  s:\n    command: npx\n", nil)
			require.NotNil(t, ws, render(problems))
			require.Empty(t, problems)
			assert.Equal(t, tc.want, ws.Cache.MaxBytes)
		})
	}
	assert.Equal(t, int64(DefaultCacheMaxBytes), Empty().Cache.MaxBytes, "an absent config has the same cache")
}

func TestLifecycleAndLimitKeys(t *testing.T) {
	ws, problems := loadYAML(t, `version: 1
limits: {max_concurrent: 8, max_instances: 40, max_rss: 512MiB}
servers:
  s:
    command: npx
    lease: {max_instances: 0, queue_timeout: 5s, max_age: 1h, max_calls: 100}
`, nil)
	require.NotNil(t, ws, render(problems))
	require.Empty(t, problems)
	assert.Equal(t, Limits{MaxConcurrent: 8, MaxInstances: 40, MaxRSS: 512 << 20}, ws.Limits)
	assert.Equal(t, Lease{MaxInstances: 0, QueueTimeout: 5 * time.Second, MaxAge: time.Hour, MaxCalls: 100}, ws.Servers[0].Lease,
		"max_instances: 0 lifts the per-server cap")
}

func TestLimitErrors(t *testing.T) {
	tests := []struct {
		name, text, field, want string
	}{
		{"bad max_rss", "limits: {max_rss: lots}\n", "limits.max_rss", "512MiB"},
		{"max_rss unit", "limits: {max_rss: 3 parsecs}\n", "limits.max_rss", "unknown unit"},
		{"negative max_instances", "limits: {max_instances: -1}\n", "limits.max_instances", "non-negative whole number"},
		{"bad max_calls", "servers: {s: {command: npx, lease: {max_calls: often}}}\n", "lease.max_calls", "non-negative whole number"},
		{"bad max_age", "servers: {s: {command: npx, lease: {max_age: old}}}\n", "lease.max_age", "not a valid duration"},
		{"bad queue_timeout", "servers: {s: {command: npx, lease: {queue_timeout: -1s}}}\n", "lease.queue_timeout", "negative duration"},
		{"unknown lease key", "servers: {s: {command: npx, lease: {max_cals: 3}}}\n", "lease.max_cals", "max_calls"},
		{"unknown limits key", "limits: {max_instance: 3}\n", "limits.max_instance", "max_instances"},
		{"bad cache.max_bytes", "cache: {max_bytes: plenty}\n", "cache.max_bytes", "512MiB"},
		{"unknown cache key", "cache: {max_entries: 3}\n", "cache.max_entries", "max_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := loadYAML(t, "version: 1\n"+tt.text, nil)
			assert.Contains(t, problemAt(t, problems, tt.field).Message, tt.want)
		})
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "512MiB": 512 << 20, "512mib": 512 << 20, "1.5G": 3 << 29,
		"2GB": 2e9, "64 KB": 64000, "64K": 64 << 10, "10B": 10,
	} {
		got, err := ParseSize(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "MiB", "1e3", "12 apples", "-5", "99999999999TiB"} {
		_, err := ParseSize(in)
		assert.Error(t, err, in)
	}
}
