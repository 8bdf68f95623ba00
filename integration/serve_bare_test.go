package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestServeIsTheDefaultCommand: "mcp-aggregator --config FILE", with no command word,
// serves MCP on stdio as "serve" does.
func TestServeIsTheDefaultCommand(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, stdioTransport, aggregatorOptions{bare: true, configs: []string{writeConfig(t, `version: 1
servers:
  demo:
    truely-stateless: true
    `+demoServer("tools")+`
    tools: {whitelist: [echo]}
`)}})
	a.waitLoaded()
	c := a.connect()
	assert.JSONEq(t, `{"content":[{"type":"text","text":"hi"}]}`, string(c.callToolResult("echo", map[string]any{"text": "hi"})))
}
