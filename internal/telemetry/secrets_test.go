package telemetry

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSecrets(t *testing.T) {
	env := map[string]string{
		envHeaders:        "x-api-key=key-4f1d,authorization=Bearer%20tok-9c0e, empty=",
		envTracesHeaders:  "dataset=traces-a,x-honeycomb-team=team%2Fkey-77",
		envEndpoint:       "https://otuser:otpass-31@collector.example.com:4318?token=q-5a",
		envTracesEndpoint: "%zz",
	}
	got := Secrets(func(name string) string { return env[name] })
	for _, want := range []string{"key-4f1d", "Bearer%20tok-9c0e", "Bearer tok-9c0e", "tok-9c0e", "traces-a",
		"team%2Fkey-77", "team/key-77", "otuser:otpass-31", "otuser", "otpass-31", "q-5a"} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "")
	assert.Empty(t, Secrets(func(string) string { return "" }))
}
