package benchmark

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// binary is the mcp-aggregator executable built by TestMain. The demo upstreams are this
// same file started as "demo-server tools".
var binary string

// upstreamEnv, when set to a number N, turns this test binary into a stdio MCP server with N
// tools (see serveToolsUpstream). The aggregator starts it that way for the tools/list
// benchmark, which needs upstreams far larger than the demo servers.
const upstreamEnv = "MCP_AGGREGATOR_BENCH_TOOLS"

func TestMain(m *testing.M) {
	if n := os.Getenv(upstreamEnv); n != "" {
		os.Exit(serveToolsUpstream(n))
	}
	os.Exit(run(m))
}

// run builds the binary into a temporary directory, runs the tests and benchmarks, and
// removes the directory again.
func run(m *testing.M) int {
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

// serveToolsUpstream serves the many-tools upstream on stdin/stdout and returns the exit code.
func serveToolsUpstream(count string) int {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "benchmark upstream: %s=%q is not a positive number\n", upstreamEnv, count)
		return 2
	}
	if err := serveStdio(newToolsServer(n)); err != nil {
		fmt.Fprintln(os.Stderr, "benchmark upstream:", err)
		return 1
	}
	return 0
}
