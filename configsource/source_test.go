package configsource

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, path, text string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolve(t *testing.T) {
	sep := string(filepath.ListSeparator)
	tests := []struct {
		name  string
		flags []string
		env   map[string]string
		files []string // created in the working directory
		want  Source   // without Notes
		notes []string // what the one note, if any, says
	}{
		{name: "flags win over the environment and the defaults",
			flags: []string{"a.yaml", "b.json"}, env: map[string]string{EnvVar: "c.yaml"}, files: []string{"mcp-aggregator.yaml"},
			want: Source{Paths: []string{"a.yaml", "b.json"}, Origin: OriginFlags}},
		{name: "the environment lists files like PATH, blanks and empty entries dropped",
			env: map[string]string{EnvVar: "a.yaml" + sep + sep + " b.json "}, files: []string{"mcp-aggregator.yaml"},
			want: Source{Paths: []string{"a.yaml", "b.json"}, Origin: OriginEnv}},
		{name: "an environment of blanks is no list",
			env: map[string]string{EnvVar: " " + sep + " "}, files: []string{"mcp-aggregator.yaml"},
			want: Source{Paths: []string{"./mcp-aggregator.yaml"}, Origin: OriginDefault}},
		{name: "the first default file",
			files: []string{"mcp-aggregator.yaml"},
			want:  Source{Paths: []string{"./mcp-aggregator.yaml"}, Origin: OriginDefault}},
		{name: "the second default file",
			files: []string{".minds/mcp.yaml"},
			want:  Source{Paths: []string{"./.minds/mcp.yaml"}, Origin: OriginDefault}},
		{name: "both default files: the first is read, the ignored one named",
			files: []string{"mcp-aggregator.yaml", ".minds/mcp.yaml"},
			want:  Source{Paths: []string{"./mcp-aggregator.yaml"}, Origin: OriginDefault},
			notes: []string{"both ./mcp-aggregator.yaml and ./.minds/mcp.yaml exist in ", "using ./mcp-aggregator.yaml and ignoring ./.minds/mcp.yaml", "pass both with --config"}},
		{name: "a directory of a default file's name is no config",
			files: []string{"mcp-aggregator.yaml/x"},
			want:  Source{Demo: true, Origin: OriginDemo},
			notes: []string{"no config found in "}},
		{name: "nothing: the demo, saying where it looked and how to point elsewhere",
			want:  Source{Demo: true, Origin: OriginDemo},
			notes: []string{"no config found in ", "neither ./mcp-aggregator.yaml nor ./.minds/mcp.yaml there", "--config FILE", EnvVar + "=FILE", "use absolute paths"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				write(t, filepath.Join(dir, f), "version: 1\n")
			}
			t.Chdir(dir)
			got := Resolve(tt.flags, env(tt.env))
			notes := got.Notes
			got.Notes = nil
			assert.Equal(t, tt.want, got)
			if len(tt.notes) == 0 {
				assert.Empty(t, notes)
				return
			}
			require.Len(t, notes, 1)
			wd, err := os.Getwd()
			require.NoError(t, err)
			assert.Contains(t, notes[0], " in "+wd, "the note names the directory it looked in")
			for _, part := range tt.notes {
				assert.Contains(t, notes[0], part)
			}
		})
	}
}

func TestLog(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	wd, err := os.Getwd()
	require.NoError(t, err)
	tests := []struct {
		name string
		src  Source
		want []string // the log's lines, as level and message
	}{
		{"files", Source{Paths: []string{"a.yaml", "/etc/b.yaml"}, Origin: OriginFlags},
			[]string{`level=INFO msg=config files=` + filepath.Join(wd, "a.yaml") + string(filepath.ListSeparator) + `/etc/b.yaml from=--config`}},
		{"a note, then the files", Source{Paths: []string{"./mcp-aggregator.yaml"}, Origin: OriginDefault, Notes: []string{"both exist"}},
			[]string{`level=WARN msg="both exist"`, `level=INFO msg=config files=` + filepath.Join(wd, "mcp-aggregator.yaml") + ` from=default`}},
		{"the demo: its note alone", Source{Demo: true, Origin: OriginDemo, Notes: []string{"no config found"}},
			[]string{`level=WARN msg="no config found"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
			tt.src.Log(log)
			assert.Equal(t, tt.want, strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"))
		})
	}
}

func TestWatched(t *testing.T) {
	assert.Equal(t, []string{"a.yaml"}, Source{Paths: []string{"a.yaml"}, Origin: OriginFlags}.Watched())
	assert.Nil(t, Source{Demo: true}.Watched())
}

// TestLoadAndLoadLive: a file given but missing is an error for a command that reads
// the config once, and no servers for a server that already runs, which a config
// deleted meanwhile stops.
func TestLoadAndLoadLive(t *testing.T) {
	dir := t.TempDir()
	present := write(t, filepath.Join(dir, "a.yaml"), "version: 1\nservers:\n  a: {command: sh}\n")
	missing := filepath.Join(dir, "gone.yaml")

	ws, problems := Source{Paths: []string{present}}.Load()
	require.Empty(t, problems)
	require.Len(t, ws.Servers, 1)

	_, problems = Source{Paths: []string{present, missing}}.Load()
	require.Len(t, problems, 1)
	assert.Equal(t, config.SeverityError, problems[0].Severity)
	assert.Contains(t, problems[0].String(), "file does not exist")

	ws, problems = Source{Paths: []string{present, missing}}.LoadLive()
	require.Len(t, problems, 1)
	assert.Equal(t, config.SeverityWarning, problems[0].Severity)
	assert.Contains(t, problems[0].String(), "treated as empty")
	require.Len(t, ws.Servers, 1)

	ws, problems = Source{Paths: []string{missing}}.LoadLive()
	require.Len(t, problems, 1)
	assert.Equal(t, config.SeverityWarning, problems[0].Severity)
	require.NotNil(t, ws)
	assert.Empty(t, ws.Servers, "a config deleted while serving means no servers")
}

// TestLoadDemo: the demo config runs this binary's demo servers, read the same by
// Load and LoadLive.
func TestLoadDemo(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	for name, load := range map[string]func(Source) (*config.Workspace, []config.Problem){
		"Load": Source.Load, "LoadLive": Source.LoadLive,
	} {
		t.Run(name, func(t *testing.T) {
			ws, problems := load(Source{Demo: true, Origin: OriginDemo})
			require.Empty(t, problems)
			require.Len(t, ws.Servers, 2)
			for _, s := range ws.Servers {
				assert.Equal(t, exe, s.Command, s.ID)
				assert.Equal(t, "demo-server", s.Args[0], s.ID)
			}
		})
	}
}

// TestLoadTeachesSecrets: every load, once or live, adds the secrets of what it read
// to the set the logs are scrubbed of.
func TestLoadTeachesSecrets(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "c.yaml"), "version: 1\nservers:\n  a: {command: sh, env: {TOKEN: {env: CONFIGSOURCE_SECRET}}}\n")
	t.Setenv("CONFIGSOURCE_SECRET", "configsource-test-secret")
	for name, load := range map[string]func(Source) (*config.Workspace, []config.Problem){
		"Load": Source.Load, "LoadLive": Source.LoadLive,
	} {
		t.Run(name, func(t *testing.T) {
			var secrets redact.Set
			_, problems := load(Source{Paths: []string{cfg}, Secrets: &secrets})
			require.Empty(t, problems)
			assert.Equal(t, "TOKEN=<redacted>", secrets.String("TOKEN=configsource-test-secret"))
		})
	}
	// Without a set, loading still works.
	_, problems := Source{Paths: []string{cfg}}.Load()
	assert.Empty(t, problems)
}
