package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlainHTTPFixFitsTheFile: the fix for a plain http:// URL names the insecure
// key where the file can hold it, and the way to a file that can where it cannot.
func TestPlainHTTPFixFitsTheFile(t *testing.T) {
	_, problems := loadYAML(t, "version: 1\nservers:\n  b: {url: 'http://example.com/mcp'}\n", nil)
	p := problemAt(t, problems, "url")
	assert.Contains(t, p.Message, "or set insecure: true if you accept that")

	ws, problems := loadYAML(t, `{"mcpServers": {"b": {"url": "http://example.com/mcp"}}}`, nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, []string{"b"}, ws.Rejected)
	p = problemAt(t, problems, "url")
	assert.Contains(t, p.Message, "mcp-aggregator import FILE")
	assert.NotContains(t, p.Message, "or set insecure: true if you accept that")
}
