package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRateLimitsLoad(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nrate_limits:\n  calls: {per_second: 2.5}\n  servers:\n    github: {per_second: 1, burst: 5}\n"+accessServers, nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, Rate{PerSecond: 2.5, Burst: 3}, ws.RateLimits.Calls, "the burst defaults to the rate, rounded up")
	assert.Equal(t, map[string]Rate{"github": {PerSecond: 1, Burst: 5}}, ws.RateLimits.Servers)
}

func TestRateLimitsProblems(t *testing.T) {
	for _, tc := range []struct{ name, yaml, field, contains string }{
		{"no rate", "rate_limits: {calls: {burst: 2}}", "rate_limits.calls.per_second", "required"},
		{"zero rate", "rate_limits: {calls: {per_second: 0}}", "rate_limits.calls.per_second", "above 0"},
		{"not a number", "rate_limits: {calls: {per_second: fast}}", "rate_limits.calls.per_second", "not a rate"},
		{"zero burst", "rate_limits: {calls: {per_second: 1, burst: 0}}", "rate_limits.calls.burst", "lets no call through"},
		{"unknown server", "rate_limits: {servers: {githb: {per_second: 1}}}", "rate_limits.servers.githb", "no server \"githb\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, problems := loadYAML(t, "version: 1\n"+tc.yaml+accessServers, nil)
			assert.Nil(t, ws)
			p := problemAt(t, problems, tc.field)
			assert.Equal(t, SeverityError, p.Severity)
			assert.Greater(t, p.Line, 0)
			assert.Contains(t, p.String(), tc.contains)
		})
	}
}
