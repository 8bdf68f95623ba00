package config

import (
	"io/fs"
	"maps"
	"os"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary text to the loader. Whatever the input: no panic, a nil
// Workspace only with an error, every kept server hashed and unique, rejected servers
// never among the kept ones, the same result twice, and the environment's secret never
// in a problem unless the config itself spelled it out.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"testdata/full.yaml", "testdata/layered-global.yaml", "testdata/mistakes.yaml"} {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(string(data))
		}
	}
	f.Add("version: 1\nservers:\n  a: {command: npx, env: {T: {env: SECRET}}}\n")
	for _, seed := range dialectSeeds() {
		f.Add(seed)
	}
	const secret = "zz-fuzz-secret-zz"
	env := envOf(map[string]string{"SECRET": secret, "HOST": "example.com"})
	files := map[string]string{"/cfg/.env": "FILE_SECRET=" + secret + "\n"}
	readFile := func(path string) ([]byte, error) {
		if s, ok := files[path]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	f.Fuzz(func(t *testing.T, data string) {
		src := []source{{name: "/cfg/mcp.yaml", data: []byte(data)}}
		ws, problems := load(src, env, readFile)
		if ws == nil && !HasErrors(problems) {
			t.Fatalf("nil workspace without an error")
		}
		for _, p := range problems {
			if p.Message == "" {
				t.Fatalf("problem without a message: %+v", p)
			}
		}
		if !strings.Contains(data, secret) && strings.Contains(render(problems), secret) {
			t.Fatalf("secret leaked into problems:\n%s", render(problems))
		}
		if ws == nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range ws.Servers {
			if s.Hash == "" || seen[s.ID] {
				t.Fatalf("server %q: empty hash or duplicate id", s.ID)
			}
			seen[s.ID] = true
		}
		for _, id := range ws.Rejected {
			if seen[id] {
				t.Fatalf("server %q both kept and rejected", id)
			}
		}
		again, _ := load(src, env, readFile)
		for i, s := range ws.Servers {
			if again.Servers[i].Hash != s.Hash {
				t.Fatalf("server %q: hash differs between two loads", s.ID)
			}
		}
	})
}

// dialectSeeds are small configs of every dialect.
func dialectSeeds() []string {
	return []string{
		`{"mcpServers": {"a b": {"command": "npx", "args": ["-y", "x"], "env": {"T": "${SECRET}"}}, "r": {"type": "http", "url": "https://h/mcp", "headers": {"A": "${env:SECRET}"}}}}`,
		"{\n // c\n \"inputs\": [{\"id\": \"k\"}],\n \"servers\": {\"v\": {\"type\": \"stdio\", \"command\": \"uvx\", \"env\": {\"K\": \"${input:k}\"},},},\n}",
		`{"servers": {"t": {"command": "npx", "allowedPaths": ["/p"], "description": "d"}}, "enabled": true}`,
		"tools:\n  - {name: h, type: mcp, command: npx, envFile: .env, timeout: 5}\n  - {name: l, type: mcp, server: '@x/y'}\n",
		"myai:\n  toolbox:\n    max_concurrent: 3\n    tools: [{name: t, timeout: PT1S}]\n    mcps:\n      - {name: c, url: 'https://h/mcp', mode: strict}\n",
	}
}

// FuzzImport checks the promise of import: whatever a file is, if it loads, the YAML
// import prints for it ends with a newline and loads to the same servers.
func FuzzImport(f *testing.F) {
	for _, seed := range dialectSeeds() {
		f.Add(seed)
	}
	f.Add("version: 1\nservers:\n  a: &a {command: npx, args: [x]}\n  b: {<<: *a, cwd: sub}\n")
	env := envOf(map[string]string{"SECRET": "s3cret", "K": "k"})
	noFiles := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	f.Fuzz(func(t *testing.T, data string) {
		want, _ := load([]source{{name: "/cfg/mcp.yaml", data: []byte(data)}}, env, noFiles)
		if want == nil {
			return
		}
		out, problems := Import([]ImportFile{{Name: "/cfg/mcp.yaml", Data: []byte(data)}})
		if HasErrors(problems) {
			t.Fatalf("import failed on a config that loads:\n%s", render(problems))
		}
		if !strings.HasSuffix(string(out), "\n") {
			t.Fatalf("the imported YAML does not end with a newline: %q", out)
		}
		got, problems := load([]source{{name: "/cfg/imported.yaml", data: out}}, env, noFiles)
		if got == nil {
			t.Fatalf("the imported YAML does not load:\n%s\n%s", render(problems), out)
		}
		if a, b := idsAndHashes(want), idsAndHashes(got); !maps.Equal(a, b) {
			t.Fatalf("servers differ after import: %v != %v\n%s", a, b, out)
		}
	})
}
