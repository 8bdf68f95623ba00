package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"2m", 2 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"0", 0},
		{"30", 30 * time.Second},
		{" 30 ", 30 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{".5", 500 * time.Millisecond},
		{"2.", 2 * time.Second},
		{"P0DT0H0M30S", 30 * time.Second},
		{"PT2M", 2 * time.Minute},
		{"P1D", 24 * time.Hour},
		{"P1W", 7 * 24 * time.Hour},
		{"PT1H30M", 90 * time.Minute},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1,5S", 1500 * time.Millisecond},
		{"pt10s", 10 * time.Second},
		{"P0DT0H1M0S", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseDurationRejects(t *testing.T) {
	tests := map[string]string{
		"":            "empty",
		"-5s":         "negative",
		"-5":          "negative",
		"soon":        "not a recognised duration",
		"5 minutes":   "not a recognised duration",
		"NaN":         "not a recognised duration",
		"Inf":         "not a recognised duration",
		"1e3":         "not a recognised duration",
		"P":           "not a valid ISO 8601 duration",
		"PT":          "not a valid ISO 8601 duration",
		"P1Y":         "years and months",
		"P1M":         "years and months",
		"PT1S2M":      "not a valid ISO 8601 duration",
		"P1DT":        "not a valid ISO 8601 duration",
		"99999999999": "too long",
		"P999999999W": "too long",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			_, err := ParseDuration(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}

// TestParseDurationErrorsNeverEchoInput guards the secret rule: callers may pass values
// from the environment, so errors describe the problem without the text.
func TestParseDurationErrorsNeverEchoInput(t *testing.T) {
	for _, in := range []string{"sekret-value", "P1Ysekret", "-sekret"} {
		_, err := ParseDuration(in)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "sekret")
	}
}
