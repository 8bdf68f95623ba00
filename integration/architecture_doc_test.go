package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modulePackages returns the directory of every Go package of the module rooted at root,
// relative to it and with slashes ("proxy", "internal/rawjson", "cmd/mcp-aggregator"): the
// directories holding .go files, leaving out testdata, node_modules, hidden directories and
// everything under a nested go.mod, which is another module.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path == root {
				return nil
			}
			if name == "testdata" || name == "node_modules" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	require.NoError(t, err)
	pkgs := make([]string, 0, len(seen))
	for p := range seen {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return pkgs
}

// TestArchitectureDocNamesEveryPackage fails when the module has a package that
// docs/architecture.md does not name, in backquotes, as `dir` or `dir/`: a new package
// comes with the line that says its one job.
func TestArchitectureDocNamesEveryPackage(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(doc), -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	pkgs := modulePackages(t, root)
	require.Contains(t, pkgs, "proxy", "the walk found the module's packages")
	for _, p := range pkgs {
		assert.True(t, named[p], "package %s is not named in docs/architecture.md: add it to the table of packages with its one job", p)
	}
}
