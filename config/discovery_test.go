package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiscoveryDefaults(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, Discovery{Mode: DiscoveryAll}, ws.Discovery)
	assert.Equal(t, Discovery{Mode: DiscoveryAll}, Empty().Discovery)
}

func TestDiscoverySearchMode(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\ndiscovery:\n  mode: search\n  always: ['fs_read_file', 'github_*']\n", nil)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, problems)
	assert.Equal(t, Discovery{Mode: DiscoverySearch, Always: []string{"fs_read_file", "github_*"}}, ws.Discovery)
}

func TestDiscoveryMistakes(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		field    string
		line     int
		severity Severity
		fix      string
	}{
		{"unknown mode", "version: 1\ndiscovery:\n  mode: serch\n", "discovery.mode", 3, SeverityError, `did you mean "search"?`},
		{"mode is a list", "version: 1\ndiscovery:\n  mode: [search]\n", "discovery.mode", 3, SeverityError, "must be a single value"},
		{"section is a list", "version: 1\ndiscovery: [search]\n", "discovery", 2, SeverityError, "must be a mapping (mode, always)"},
		{"always is a string", "version: 1\ndiscovery:\n  always: fs_read_file\n", "discovery.always", 3, SeverityError, "must be a list"},
		{"empty pattern", "version: 1\ndiscovery:\n  always: ['']\n", "discovery.always[0]", 3, SeverityError, "write an exported tool name"},
		{"unknown key", "version: 1\ndiscovery:\n  mod: search\n", "discovery.mod", 3, SeverityWarning, `did you mean "mode"?`},
		{"pattern keeps everything", "version: 1\ndiscovery:\n  mode: search\n  always: ['*']\n", "discovery.always[0]", 4, SeverityWarning, "search mode keeps nothing out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, problems := loadYAML(t, tt.text, nil)
			p := problemAt(t, problems, tt.field)
			assert.Equal(t, tt.severity, p.Severity)
			assert.Equal(t, tt.line, p.Line)
			assert.Empty(t, p.Server)
			assert.Contains(t, p.Message, tt.fix)
			if tt.severity == SeverityError {
				assert.Nil(t, ws, "a bad workspace setting rejects the whole config")
			} else {
				assert.NotNil(t, ws)
			}
		})
	}
}

func TestDiscoveryLayering(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"global.yaml":  "version: 1\ndiscovery:\n  mode: search\n  always: [a]\n",
		"project.yaml": "version: 1\ndiscovery:\n  always: [b, c]\n",
	})
	ws, problems := Load([]string{dir + "/global.yaml", dir + "/project.yaml"}, nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, Discovery{Mode: DiscoverySearch, Always: []string{"b", "c"}}, ws.Discovery, "a later file overrides key by key")
}
