package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLoginRefusesWhatItCannotLogInTo(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "mcp.yaml"), `version: 1
servers:
  plain:
    url: https://mcp.example.com/mcp
  secured:
    url: https://mcp.example.com/other
    auth: {type: oauth}
  broken:
    url: https://mcp.example.com/x
    auth: {type: basic}
`)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no server named", []string{"login", "--config", cfg}, 2, "name the server"},
		{"two servers", []string{"login", "secured", "plain", "--config", cfg}, 2, `unexpected argument "plain"`},
		{"unknown server", []string{"login", "nope", "--config", cfg}, 1, `no server "nope" in the config (servers with auth: {type: oauth}: secured)`},
		{"server without oauth", []string{"login", "plain", "--config", cfg}, 1, `server "plain" does not use OAuth`},
		{"server with config errors", []string{"login", "--config", cfg, "broken"}, 1, `auth.type: "basic" is not supported`},
		{"logout of a server never logged in", []string{"logout", "secured", "--config", cfg}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runIn(t, dir, tt.args...)
			assert.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", out, errOut)
			assert.Contains(t, errOut, tt.want)
		})
	}
	out, _, _ := runIn(t, dir, "logout", "secured", "--config", cfg)
	assert.Equal(t, "no stored login for secured\n", out)
}
