package benchmark

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the mcp-aggregator executable built by TestMain.
var binary string

// binaryEnv, when set, names an mcp-aggregator executable to benchmark instead of the one
// TestMain builds: one that outlives the run, so that perf can still read its symbols.
const binaryEnv = "MCP_AGGREGATOR_BENCH_BINARY"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(serveHelper(os.Args[1:]))
	}
	os.Exit(run(m))
}

// run builds the binary into a temporary directory, runs the tests and benchmarks, and
// removes the directory again.
func run(m *testing.M) int {
	if path := os.Getenv(binaryEnv); path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchmark:", err)
			return 1
		}
		binary = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "mcp-aggregator-benchmark-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmark:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	// go test runs in the package directory, two levels below the module root.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmark:", err)
		return 1
	}
	binary = filepath.Join(dir, "mcp-aggregator")
	build := exec.Command("go", "build", "-o", binary, "./cmd/mcp-aggregator")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchmark: building the aggregator:", err)
		return 1
	}
	return m.Run()
}
