package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReservedServerIDRejected: the admin tools' id cannot name a configured server, or
// that server's tools would be mistaken for the admin tools.
func TestReservedServerIDRejected(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nservers:\n  good:\n    command: npx\n  mcp_admin:\n    command: npx\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, []string{ReservedServerID}, ws.Rejected)
	assert.Nil(t, ws.Server(ReservedServerID))
	assert.NotNil(t, ws.Server("good"), "the error stays with its server")
	p := problemAt(t, problems, "")
	assert.Equal(t, SeverityError, p.Severity)
	assert.Equal(t, ReservedServerID, p.Server)
	assert.Equal(t, 5, p.Line)
	assert.Contains(t, p.Message, "reserved")
	assert.Contains(t, p.Message, "rename the server")

	// Only the exact id is taken; ids that merely resemble it are fine.
	ws, problems = loadYAML(t, "version: 1\nservers:\n  mcp_admin2: {command: npx}\n  MCP_Admin: {command: npx}\n", nil)
	require.Empty(t, problems, render(problems))
	assert.NotNil(t, ws.Server("mcp_admin2"))
	assert.NotNil(t, ws.Server("MCP_Admin"))
}

// TestReservedServerIDInDialects: a client's config may call a server mcp_admin; it is
// read under another id, with a warning, like any other unusable name.
func TestReservedServerIDInDialects(t *testing.T) {
	ws, problems := loadYAML(t, "{\"mcpServers\": {\n\"mcp_admin\": {\"command\": \"npx\"},\n\"other\": {\"command\": \"uvx\"}}}\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, ws.Rejected, render(problems))
	assert.Nil(t, ws.Server(ReservedServerID))
	s := ws.Server("mcp_admin-2")
	require.NotNil(t, s, render(problems))
	assert.Equal(t, "npx", s.Command)
	p := problemAt(t, problems, "")
	assert.Equal(t, SeverityWarning, p.Severity)
	assert.Equal(t, 2, p.Line)
	assert.Contains(t, p.Message, `"mcp_admin" is reserved`)
	assert.Contains(t, p.Message, `read as "mcp_admin-2"`)

	// A renamed id does not take one the file already uses.
	ws, problems = loadYAML(t, "mcps:\n  - {name: mcp_admin-2, url: 'https://x'}\n  - {name: mcp_admin, url: 'https://y'}\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, "https://x", ws.Server("mcp_admin-2").URL)
	assert.Equal(t, "https://y", ws.Server("mcp_admin-3").URL)
	assert.Nil(t, ws.Server(ReservedServerID))

	// Written twice, it is still the duplicate the loader reports.
	ws, problems = loadYAML(t, "{\"mcpServers\": {\n\"mcp_admin\": {\"command\": \"x\"},\n\"mcp_admin\": {\"command\": \"y\"}}}\n", nil)
	assert.Nil(t, ws)
	assert.Contains(t, render(problems), "already defined on line 2")
}

// TestImportRenamesReservedServerID: import writes the id the loader would use.
func TestImportRenamesReservedServerID(t *testing.T) {
	out, problems := Import([]ImportFile{{Name: "/cfg/mcp.json", Data: []byte(`{"mcpServers": {"mcp_admin": {"command": "npx"}}}`)}})
	require.False(t, HasErrors(problems), render(problems))
	ws, problems := LoadBytes("/cfg/imported.yaml", out, nil)
	require.NotNil(t, ws, render(problems))
	require.False(t, HasErrors(problems), render(problems))
	assert.NotNil(t, ws.Server("mcp_admin-2"), string(out))
}

// TestValidIDKeptFromARenamedServer: a server named with a valid id keeps it, even
// when an unusable name before it cleans to the same id: that one is read under
// the next free suffix, and told so.
func TestValidIDKeptFromARenamedServer(t *testing.T) {
	ws, problems := loadYAML(t, "{\"mcpServers\": {\n\"Brave Search\": {\"command\": \"node\"},\n\"Brave-Search\": {\"command\": \"npx\"}}}\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, "npx", ws.Server("Brave-Search").Command)
	assert.Equal(t, "node", ws.Server("Brave-Search-2").Command)
	text := render(problems)
	assert.Contains(t, text, `"Brave Search" is not a valid server id here (1 to 64 letters, digits, '.', '_' or '-'); it is read as "Brave-Search-2"`)
	assert.NotContains(t, text, `"Brave-Search" is`)
}
