package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowServer is the config of the server slow, which hangs in initialize for
// as long as its connect_timeout (10m) lets it: the first load waits for it.
func slowServer() string {
	return serverYAML("slow", statelessServer, demoServer("misbehave", "hang-init"), "connect_timeout: 10m")
}

// missingCommand is the setting of a command that does not exist.
func missingCommand(t *testing.T) string { return "command: " + quoted(t.TempDir()+"/no-such-command") }

// TestReliabilityStartFailureToldAtOnce: on the first load, servers that fail at
// once (a command that does not exist, a server that exits in initialize) are told
// in the log and in mcp_status (problems and health) while another server still
// starts: nobody waits out the slow one's connect_timeout to learn of them.
func TestReliabilityStartFailureToldAtOnce(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+slowServer()+
		serverYAML("missing", missingCommand(t))+serverYAML("exitinit", demoServer("misbehave", "exit-init")))
	const soon = 20 * time.Second // far less than slow's connect_timeout
	for _, id := range []string{"missing", "exitinit"} {
		relLogLine(t, a, soon, "level=ERROR", `\"`+id+`\"`, "could not start")
	}
	c := a.connect()
	for _, id := range []string{"missing", "exitinit"} {
		health := relWaitHealth(t, c, id, func(h string) bool { return h != "" && h != "starting" }, soon)
		assert.Contains(t, health, "failed: ", "server %q", id)
	}
	problems := relStatus(t, c).Problems
	require.False(t, a.loaded(), "the first load has ended: slow no longer starts; stderr:\n%s", a.log)
	for _, id := range []string{"missing", "exitinit"} {
		assert.True(t, anyContains(problems, "error:", `server "`+id+`"`, "could not start"), "server %q: mcp_status problems: %q", id, problems)
	}
	assert.False(t, anyContains(problems, `server "slow"`), "slow is still starting: %q", problems)
}

// TestReliabilityRequiredStartFailureExitsAtOnce: a required server that fails
// every start attempt on the first load makes serve exit non-zero then, while
// another server still starts, not once that one's connect_timeout is out.
func TestReliabilityRequiredStartFailureExitsAtOnce(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+slowServer()+
		serverYAML("vital", "required: true", missingCommand(t)))
	code := relWaitExit(t, a, "a required server failing to start") // far less than slow's connect_timeout
	a.killed = true                                                 // it exits by itself, non-zero
	assert.Equal(t, 1, code, "exit code; stderr:\n%s", a.log)
	assert.True(t, a.log.containsLine("level=ERROR", "a required server could not start; exiting", "server=vital"), "stderr:\n%s", a.log)
	assert.Equal(t, 1, relCountLines(a, "a required server could not start; exiting"), "told once; stderr:\n%s", a.log)
}
