package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the mcp-aggregator executable built by TestMain; every test runs it, and the
// demo upstreams are this same file started as "demo-server NAME".
var binary string

// nodeDir holds the pinned Node.js servers and the SDK client (see node/README.md).
var nodeDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests builds the binary into a temporary directory, runs the tests and removes the
// directory again, so a failed build or test run leaves nothing behind.
func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcp-aggregator-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	// go test runs in the package directory; the module root is its parent.
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	nodeDir = filepath.Join(root, "integration", "node")
	binary = filepath.Join(dir, "mcp-aggregator")

	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/mcp-aggregator")
	build := exec.Command("go", args...)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: building the aggregator:", err)
		return 1
	}
	return m.Run()
}

// nodeEntry returns the path of a file inside node/node_modules and fails the test when
// the Node.js dependencies are not installed: CI always installs them, so a missing
// directory is a broken setup, never a reason to skip.
func nodeEntry(t testing.TB, rel string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH; install Node.js 20 or later (%v)", err)
	}
	path := filepath.Join(nodeDir, "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing (%v); run: cd integration/node && npm ci", path, err)
	}
	return path
}

// Entry points of the pinned Node.js packages, relative to node_modules.
const (
	everythingEntry = "@modelcontextprotocol/server-everything/dist/index.js"
	memoryEntry     = "@modelcontextprotocol/server-memory/dist/index.js"
)
