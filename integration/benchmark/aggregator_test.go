package benchmark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a server process may take to say where it listens.
const startTimeout = 30 * time.Second

// stopTimeout bounds a clean shutdown before a server process is killed.
const stopTimeout = 20 * time.Second

// stderrLog keeps the last part of a process's stderr, to show when a benchmark fails,
// and reports the URL of the first "listening" line.
type stderrLog struct {
	mu      sync.Mutex
	tail    []byte
	partial []byte
	url     string
	found   chan struct{}
}

const stderrKeep = 64 << 10

var listeningLine = regexp.MustCompile(`msg=listening url=(http://\S+/mcp)`)

func newStderrLog() *stderrLog { return &stderrLog{found: make(chan struct{})} }

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, p...)
	if len(l.tail) > stderrKeep {
		l.tail = append([]byte(nil), l.tail[len(l.tail)-stderrKeep:]...)
	}
	if l.url != "" {
		return len(p), nil
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if m := listeningLine.FindSubmatch(l.partial[:i]); m != nil {
			l.url = string(m[1])
			l.partial = nil
			close(l.found)
			break
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *stderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.tail)
}

// httpProcess is a child process that serves HTTP: "mcp-aggregator serve --http", or a
// benchmark helper (the echo upstream, the bridge).
type httpProcess struct {
	cmd    *exec.Cmd
	url    string
	log    *stderrLog
	exited chan struct{}
}

// startHTTPAggregator serves configPath over streamable HTTP on a loopback port until the
// benchmark ends.
func startHTTPAggregator(tb testing.TB, configPath string) *httpProcess {
	tb.Helper()
	return startHTTPProcess(tb, nil, binary, "serve", "--config", configPath, "--http", "127.0.0.1:0")
}

// startHTTPProcess starts command, which says on stderr where it listens, and stops it
// when the benchmark ends.
func startHTTPProcess(tb testing.TB, env []string, command string, args ...string) *httpProcess {
	tb.Helper()
	a := &httpProcess{log: newStderrLog(), exited: make(chan struct{})}
	a.cmd = exec.Command(command, args...)
	a.cmd.Env = append(os.Environ(), env...)
	a.cmd.Dir = tb.TempDir()
	a.cmd.Stderr = a.log
	if err := a.cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", command, err)
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	tb.Cleanup(func() { a.stop(tb) })
	select {
	case <-a.log.found:
		a.url = a.log.url
	case <-a.exited:
		tb.Fatalf("%s %v exited at start; stderr:\n%s", command, args, a.log)
	case <-time.After(startTimeout):
		tb.Fatalf("%s %v never said where it listens; stderr:\n%s", command, args, a.log)
	}
	return a
}

// stop ends the process as an operator would, with SIGTERM, and kills it if it hangs.
func (a *httpProcess) stop(tb testing.TB) {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(stopTimeout):
		_ = a.cmd.Process.Kill()
		<-a.exited
		tb.Errorf("%s did not stop within %s of SIGTERM; stderr:\n%s", a.cmd.Path, stopTimeout, a.log)
	}
}

// rssKiB is the process's resident set size (VmRSS) in KiB.
func (a *httpProcess) rssKiB() (int64, error) {
	return readRSS(a.cmd.Process.Pid)
}

func readRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseRSS(status)
}

// parseRSS returns the VmRSS line of a /proc/PID/status file, in KiB.
func parseRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) != 2 || fields[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", line)
			}
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// dialStdioAggregator starts "mcp-aggregator serve --config configPath" over stdio and
// completes the handshake. Its stderr is kept for failure reports.
func dialStdioAggregator(tb testing.TB, configPath string) (*conn, *stderrLog) {
	tb.Helper()
	log := newStderrLog()
	return dialStdio(tb, log, nil, binary, "serve", "--config", configPath), log
}

// writeConfig writes config as mcp-aggregator.yaml in a fresh directory and returns its path.
func writeConfig(tb testing.TB, config string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "mcp-aggregator.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// replaceConfig saves config over path the way editors do: write a temporary file
// beside it, then rename it into place.
func replaceConfig(path, config string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(config), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// yamlString renders s as a YAML scalar (a JSON string is one).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
