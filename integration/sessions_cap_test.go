package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionsAreCapped: past --max-sessions open sessions, an initialize gets 503 with
// Retry-After and an error that says what frees room, and opens nothing; once a
// session ends, a new one opens.
func TestSessionsAreCapped(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))},
		flags:   []string{"--max-sessions", "3"},
	})
	a.waitLoaded()
	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"cap-test","version":"1"}}}`)
	var ids []string
	for i := range 3 {
		r := corePost(t, a.url, "", initialize, nil)
		require.Equal(t, http.StatusOK, r.status, "session %d: %s", i, r.body)
		ids = append(ids, r.header.Get("Mcp-Session-Id"))
	}
	r := corePost(t, a.url, "", initialize, nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	assert.NotEmpty(t, r.header.Get("Retry-After"))
	assert.Empty(t, r.header.Get("Mcp-Session-Id"), "a refused initialize opens no session")
	assert.Contains(t, string(r.body), "maximum of 3 open sessions")
	assert.Contains(t, string(r.body), "--max-sessions")
	// The log is read from the aggregator's stderr as it comes: wait for the line.
	_, logged := a.log.waitLine(func(line string) bool {
		return strings.Contains(line, "refused a new session") && strings.Contains(line, "max=3")
	}, callTimeout, a.exited)
	assert.True(t, logged, "%s", a.log)

	corePostDelete(t, a.url, ids[0])
	r = corePost(t, a.url, "", initialize, nil)
	assert.Equal(t, http.StatusOK, r.status, "a session ended, so one more opens: %s", r.body)
}
