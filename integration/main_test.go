package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
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

// nodeEntry returns the path of a file inside node/node_modules. What happens when
// Node.js or the pinned packages are missing depends on the slow switch (slowVar):
//
//   - switched on, as in .ci/run: the packages are installed (installNode) when they are
//     not there, and the test fails when Node.js is missing or the packages cannot be
//     installed: CI always has them, so a missing one is a broken setup, never a reason
//     to skip;
//   - switched off, as in a plain go test ./...: the test is skipped, saying what it
//     needs, since a fresh checkout may have neither Node.js nor the network npm ci
//     needs, and the default run must pass there.
func nodeEntry(t testing.TB, rel string) string {
	t.Helper()
	return nodeEntryIn(t, nodeDir, slowSwitchedOn(), rel)
}

// nodeEntryIn is nodeEntry for the packages installed in dir, with the slow switch on
// or off.
func nodeEntryIn(t testing.TB, dir string, slow bool, rel string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if !slow {
			t.Skipf("needs Node.js, which is not on PATH: install Node.js 20 or later and run npm ci in integration/node, "+
				"or set %s=1 to make this a failure (%v)", slowVar, err)
		}
		t.Fatalf("node is not on PATH; install Node.js 20 or later (%v)", err)
	}
	path := filepath.Join(dir, "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(path); err != nil {
		if !slow {
			t.Skipf("needs the pinned Node.js packages, and %s is not installed: run npm ci in integration/node, "+
				"or set %s=1 to have the tests install them (and fail when that fails)", rel, slowVar)
		}
		if ierr := installNode(); ierr != nil {
			t.Fatalf("%s is missing, and installing the pinned packages failed: %v; run: cd integration/node && npm ci", path, ierr)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s is missing after npm ci (%v): is it in integration/node/package.json?", path, err)
		}
	}
	return path
}

var (
	nodeInstall     sync.Once
	nodeInstallErr  error
	nodeInstallTime = 5 * time.Minute
)

// installNode runs npm ci in integration/node once per test binary, so that a run with
// the slow switch on needs nothing installed by hand: the versions are those of
// package-lock.json. It is bounded by nodeInstallTime.
func installNode() error {
	nodeInstall.Do(func() {
		if _, err := exec.LookPath("npm"); err != nil {
			nodeInstallErr = fmt.Errorf("npm is not on PATH: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), nodeInstallTime)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = nodeDir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		fmt.Fprintln(os.Stderr, "integration: installing the pinned Node.js packages (npm ci in integration/node)")
		if err := cmd.Run(); err != nil {
			tail := out.Bytes()
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			nodeInstallErr = fmt.Errorf("npm ci: %w (within %s): %s", err, nodeInstallTime, tail)
		}
	})
	return nodeInstallErr
}

// Entry points of the pinned Node.js packages, relative to node_modules.
const (
	everythingEntry = "@modelcontextprotocol/server-everything/dist/index.js"
	memoryEntry     = "@modelcontextprotocol/server-memory/dist/index.js"
)
