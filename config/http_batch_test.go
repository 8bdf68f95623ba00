package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMaxBatchBytes(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, int64(DefaultMaxBatchBytes), ws.HTTP.MaxBatchBytes)
	assert.Equal(t, int64(DefaultMaxBatchBytes), Empty().HTTP.MaxBatchBytes, "an absent config has the same bound")

	ws, problems = loadYAML(t, "version: 1\nhttp: {max_batch_bytes: 4096}\n", nil)
	require.NotNil(t, ws, render(problems))
	require.Empty(t, problems)
	assert.Equal(t, int64(4096), ws.HTTP.MaxBatchBytes)

	for text, want := range map[string]string{
		"http: {max_batch_bytes: 10}\n":   "too small",
		"http: {max_batch_bytes: lots}\n": "non-negative whole number",
	} {
		_, problems := loadYAML(t, "version: 1\n"+text, nil)
		assert.Contains(t, problemAt(t, problems, "http.max_batch_bytes").Message, want, text)
	}
}
