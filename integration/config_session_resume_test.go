package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestConfigSessionIDNeedsOneInstance: sessionId resumes one upstream session, so a
// server whose sessions lease instances of their own (the default) cannot use it:
// every instance would resume the same upstream session, and sessions would share its
// state. check says so as an error of that server with the fix; a shared server may
// use it, and on the sse transport, which has no use for it, it is a warning.
func TestConfigSessionIDNeedsOneInstance(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `version: 1
servers:
  leased:
    url: https://example.com/mcp
    sessionId: resume-me
  shared:
    url: https://example.com/mcp
    sessionId: resume-me
    truely-stateless: true
  legacy:
    transport: sse
    url: https://example.com/sse
    sessionId: resume-me
    truely-stateless: true
`)
	res := runCLI(t, "check", "--config", file)
	assert.Equal(t, 1, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	lines := strings.Split(res.stdout, "\n")
	assert.True(t, anyContains(lines, fmt.Sprintf("error: %s:5: ", file), `server "leased"`, "sessionId:", "truely-stateless: true", "remove sessionId"),
		"the leased server's sessionId is an error that says how to fix it:\n%s", res.stdout)
	assert.True(t, anyContains(lines, fmt.Sprintf("warning: %s:13: ", file), `server "legacy"`, "sessionId:", "sse", "ignored"),
		"sessionId on sse is not silently ignored:\n%s", res.stdout)
	assert.False(t, anyContains(lines, `server "shared"`), "a shared server may resume a session:\n%s", res.stdout)
	assert.Contains(t, res.stdout, "1 error(s), 1 warning(s)")
}
