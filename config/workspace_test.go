package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkspaceLevelErrors(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		field string
		line  int
		fix   string // part of the message that tells how to fix it
	}{
		{"invalid YAML", "version: 1\nservers:\n  a: [b\n", "", 3, "fix the syntax"},
		{"empty file", "", "version", 0, "start it with version: 1"},
		{"missing version", "servers:\n  a:\n    command: x\n", "version", 1, "add version: 1"},
		{"unsupported version", "version: 2\nservers: {}\n", "version", 1, "this build reads version: 1"},
		{"top level is a list", "- version: 1\n", "", 1, "must be a mapping"},
		{"servers is a list", "version: 1\nservers:\n  - a\n", "servers", 3, "must be a mapping"},
		{"duplicate server ids", "version: 1\nservers:\n  a:\n    command: x\n  a:\n    command: y\n", "servers.a", 5, "already defined on line 3"},
		{"bad naming pattern", "version: 1\nnaming:\n  valid_pattern: '(['\n", "naming.valid_pattern", 3, "fix it or remove it"},
		{"negative max_concurrent", "version: 1\nlimits:\n  max_concurrent: -1\n", "limits.max_concurrent", 3, "use 0 or more"},
		{"bad admin flag", "version: 1\nadmin:\n  enabled: maybe\n", "admin.enabled", 3, "use true or false"},
		{"duplicate top-level key", "version: 1\nversion: 1\n", "version", 2, "keep one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, problems := loadYAML(t, tt.text, nil)
			assert.Nil(t, ws, "a workspace-level error voids the workspace")
			p := problemAt(t, problems, tt.field)
			assert.Equal(t, SeverityError, p.Severity)
			assert.Empty(t, p.Server)
			assert.Equal(t, tt.line, p.Line)
			assert.Contains(t, p.File, "mcp.yaml")
			assert.Contains(t, p.Message, tt.fix)
		})
	}
}

func TestInvalidYAMLMessage(t *testing.T) {
	_, problems := loadYAML(t, "version: 1\n\tservers: {}\n", nil)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0].String(), "mcp.yaml:2: invalid YAML: found a tab character")
}

func TestDuplicateServerInOneFileStillReportsOtherProblems(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nservers:\n  a:\n    command: x\n  a:\n    command: y\n  b:\n    transport: websocket\n", nil)
	assert.Nil(t, ws)
	assert.Equal(t, SeverityError, problemAt(t, problems, "transport").Severity)
}

func TestSecondDocumentWarning(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\n---\nversion: 2\n", nil)
	require.NotNil(t, ws)
	require.Len(t, problems, 1)
	assert.Equal(t, SeverityWarning, problems[0].Severity)
	assert.Contains(t, problems[0].Message, "only the first YAML document")
}

func TestWorkspaceUnknownKeys(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nserver:\n  a:\n    command: x\nlimits:\n  max_concurent: 3\n", nil)
	require.NotNil(t, ws, "unknown keys are warnings")
	assert.Empty(t, ws.Servers)

	p := problemAt(t, problems, "server")
	assert.Equal(t, SeverityWarning, p.Severity)
	assert.Equal(t, 2, p.Line)
	assert.Contains(t, p.Message, `did you mean "servers"?`)

	p = problemAt(t, problems, "limits.max_concurent")
	assert.Equal(t, 6, p.Line)
	assert.Contains(t, p.Message, `did you mean "max_concurrent"?`)
}

func TestHasErrors(t *testing.T) {
	assert.False(t, HasErrors(nil))
	assert.False(t, HasErrors([]Problem{{Severity: SeverityWarning}}))
	assert.True(t, HasErrors([]Problem{{Severity: SeverityWarning}, {Severity: SeverityError}}))
}

func TestProblemString(t *testing.T) {
	p := Problem{Severity: SeverityError, File: "mcp.yaml", Line: 12, Server: "github", Field: "env.TOKEN", Message: "host variable GITHUB_TOKEN is not set"}
	assert.Equal(t, `error: mcp.yaml:12: server "github": env.TOKEN: host variable GITHUB_TOKEN is not set`, p.String())
}

func TestYAMLAnchorsAndMergeKeys(t *testing.T) {
	text := `version: 1
x-base: &base
  command: npx
  request_timeout: 10s
servers:
  a:
    <<: *base
    args: [a]
  b:
    <<: *base
    request_timeout: 20s
`
	ws, problems := loadYAML(t, text, nil)
	require.NotNil(t, ws)
	// x-base is an unknown top-level key: reported, not fatal.
	assert.Equal(t, SeverityWarning, problemAt(t, problems, "x-base").Severity)
	require.Len(t, ws.Servers, 2)
	assert.Equal(t, "npx", ws.Server("a").Command)
	assert.Equal(t, []string{"a"}, ws.Server("a").Args)
	assert.Equal(t, "20s", ws.Server("b").RequestTimeout.String(), "explicit keys win over merged ones")
}

// TestMergeKeyBomb nests merge keys so that expanding them naively would visit 10^12
// mappings; each mapping must be expanded once.
func TestMergeKeyBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nx0: &a0 {command: npx}\n")
	for i := 1; i <= 12; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "x%d: &a%d {<<: [%s]}\n", i, i, refs)
	}
	b.WriteString("servers:\n  s: {<<: *a12}\n")
	ws, _ := LoadBytes("/cfg/mcp.yaml", []byte(b.String()), nil)
	require.NotNil(t, ws)
	assert.Equal(t, "npx", ws.Server("s").Command)
}
