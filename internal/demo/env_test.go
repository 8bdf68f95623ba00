package demo

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestToolsEnvLimitedToNamedVariables: started with --env, the env tool reports the
// variables named there and refuses every other, however sensitive.
func TestToolsEnvLimitedToNamedVariables(t *testing.T) {
	t.Setenv("DEMO_GREETING", "hello")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value")
	c := start(t, "tools", "--env", "DEMO_GREETING,DEMO_UNSET")
	c.initialize("2025-06-18")

	r := c.callTool("env", map[string]any{"name": "DEMO_GREETING"})
	assert.False(t, r.IsError)
	assert.Equal(t, "hello", r.Content[0].Text)
	r = c.callTool("env", map[string]any{"name": "AWS_SECRET_ACCESS_KEY"})
	assert.True(t, r.IsError)
	assert.NotContains(t, r.Content[0].Text, "aws-secret-value")
	assert.Contains(t, r.Content[0].Text, "DEMO_GREETING, DEMO_UNSET")
}

func TestToolsRejectsUnknownArguments(t *testing.T) {
	err := Run(context.Background(), "tools", []string{"--verbose"}, strings.NewReader(""), io.Discard, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--env")
}
