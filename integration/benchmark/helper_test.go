package benchmark

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// The benchmarks' upstreams and reference hops are this test binary itself, started again
// with helperEnv set: TestMain then runs the role its arguments name instead of the tests.
//
//	echo stdio          the raw-JSON echo upstream on stdin/stdout (echo_test.go)
//	echo http           the same over HTTP on a loopback port (echo_test.go)
//	tools N             an mcp-go server with N tools on stdin/stdout (upstream_test.go)
//	relay CMD ARGS...   starts CMD and copies bytes between it and stdin/stdout
//	parser CMD ARGS...  starts CMD and passes messages, decoded and with ids mapped (parser_test.go)
//	transports CMD ARGS...  starts CMD as an upstream and passes requests through the aggregator's two stdio transports alone (transports_test.go)
//	httptransports CMD ARGS...  the same behind the aggregator's HTTP transport (transports_test.go)
//	bridge URL          an HTTP server that forwards each request to URL (bridge_test.go)
//	bridge CMD ARGS...  an HTTP server that writes each POST body to CMD's stdin (bridge_test.go)
//	router CMD ARGS...  an HTTP handler that decodes each POST, maps its id and passes it to CMD (router_test.go)
//
// Roles that serve HTTP print a "msg=listening url=..." line on stderr, as the aggregator
// does, so that startHTTPProcess finds their port the same way.
const helperEnv = "MCP_AGGREGATOR_BENCH_HELPER"

// helper returns the command line that starts this test binary in role with args, and
// the environment entry that enables helper mode. A helper's children inherit the entry.
func helper(tb testing.TB, role string, args ...string) (exe string, argv []string, env []string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe, append([]string{role}, args...), []string{helperEnv + "=1"}
}

// serveHelper runs the role named by args and returns the process's exit code.
func serveHelper(args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "benchmark helper: %s is set but no role is given\n", helperEnv)
		return 2
	}
	role, rest := args[0], args[1:]
	var err error
	switch {
	case role == "echo" && len(rest) == 1 && rest[0] == "stdio":
		err = serveEchoStdio(os.Stdin, os.Stdout)
	case role == "echo" && len(rest) == 1 && rest[0] == "http":
		err = serveEchoHTTP()
	case role == "tools" && len(rest) == 1:
		n, perr := strconv.Atoi(rest[0])
		if perr != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "benchmark helper: tools %q is not a positive number\n", rest[0])
			return 2
		}
		err = serveStdio(newToolsServer(n))
	case role == "relay" && len(rest) > 0:
		err = serveRelay(rest)
	case role == "parser" && len(rest) > 0:
		err = serveParser(rest)
	case role == "transports" && len(rest) > 0:
		err = serveTransports(rest)
	case role == "httptransports" && len(rest) > 0:
		err = serveHTTPTransports(rest)
	case role == "bridge" && len(rest) > 0:
		err = serveBridge(rest)
	case role == "router" && len(rest) > 0:
		err = serveRouter(rest)
	default:
		fmt.Fprintf(os.Stderr, "benchmark helper: unknown role %q\n", args)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchmark helper %s: %v\n", role, err)
		return 1
	}
	return 0
}

// startChild starts command with its stderr on ours, and returns the pipes to its
// stdin and from its stdout.
func startChild(command []string) (cmd *exec.Cmd, in, out *os.File, err error) {
	cmd = exec.Command(command[0], command[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin.(*os.File), stdout.(*os.File), nil
}

// serveRelay starts command and copies bytes from stdin to its stdin and from its stdout
// to stdout, and nothing else: the least one more stdio process between a client and its
// upstream can cost. It returns when the command's stdout ends.
func serveRelay(command []string) error {
	cmd, in, out, err := startChild(command)
	if err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(in, os.Stdin)
		_ = in.Close() // the client's EOF is the upstream's
	}()
	_, err = io.Copy(os.Stdout, out)
	_ = cmd.Wait()
	return err
}
