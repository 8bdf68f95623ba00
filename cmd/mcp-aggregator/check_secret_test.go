package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// TestMissingCommandNamesNoSecret: a command not found is named without the text the
// environment put into it.
func TestMissingCommandNamesNoSecret(t *testing.T) {
	const secret = "s3cr3tVALUE12345"
	lookup := func(name string) (string, bool) {
		if name == "SECRETX" {
			return secret, true
		}
		return "", false
	}
	for _, command := range []string{"py${SECRETX}", "/nonexistent/${SECRETX}/bin"} {
		cfg := "version: 1\nservers:\n  d: {command: '" + command + "'}\n"
		ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(cfg), lookup)
		require.NotNil(t, ws, "%v", problems)
		found := missingCommands(ws, "/nonexistent-path")
		require.Len(t, found, 1, command)
		assert.NotContains(t, found[0].String(), secret, command)
		assert.Contains(t, found[0].String(), "<redacted>", command)
	}
}
