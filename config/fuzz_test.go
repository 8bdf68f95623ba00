package config

import (
	"io/fs"
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
