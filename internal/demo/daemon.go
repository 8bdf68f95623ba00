package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// The daemon server stands for upstreams whose helpers escape the process
// group, as browsers and some language servers do: on start it forks a
// daemon the classic way, by a child that calls setsid() and forks again
// before it exits, so that the daemon leads no group of the upstream's,
// has no parent of the upstream's, holds none of its pipes, and ignores
// SIGTERM, SIGINT and SIGHUP. Only SIGKILL, a cgroup.kill, or someone who
// finds it some other way ends it.
//
//	daemon          the MCP server (tool daemon_pid); starts "daemon detach"
//	daemon detach   calls setsid() (as the parent asked), starts "daemon run",
//	                writes its pid to stdout and exits
//	daemon run      the daemon: ignores the polite signals and waits forever

func runDaemon(ctx context.Context, args []string, in io.Reader, out io.Writer, errOut io.Writer) error {
	switch {
	case len(args) == 0:
	case len(args) == 1 && args[0] == "detach":
		return detachDaemon(out)
	case len(args) == 1 && args[0] == "run":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		<-ctx.Done()
		return nil
	default:
		return fmt.Errorf("demo: daemon takes no argument, or detach or run; got %q", args)
	}
	daemon, err := forkDaemon()
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "daemon pid %d\n", daemon)
	s := &daemonServer{conn: &lineConn{out: out}, daemon: daemon}
	return serveLines(ctx, in, s.handle)
}

// forkDaemon runs "daemon detach" in a session of its own and returns the
// pid of the daemon it reports.
func forkDaemon() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "demo-server", "daemon", "detach")
	cmd.SysProcAttr = newSessionAttr()
	pidOut, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("demo: starting the daemon: %w", err)
	}
	line, readErr := bufio.NewReader(pidOut).ReadString('\n')
	waitErr := cmd.Wait()
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("demo: the daemon's pid did not arrive (%v, %v, %q)", readErr, waitErr, line)
	}
	return pid, nil
}

// detachDaemon is the middle process: already a session leader, it starts
// the daemon with no pipe of anyone's, reports its pid, and exits, which
// orphans the daemon.
func detachDaemon(out io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "demo-server", "daemon", "run")
	if err := cmd.Start(); err != nil { // stdin, stdout and stderr: /dev/null
		return fmt.Errorf("demo: starting the daemon: %w", err)
	}
	_, err = fmt.Fprintf(out, "%d\n", cmd.Process.Pid)
	return err
}

type daemonServer struct {
	conn   *lineConn
	daemon int
}

func (s *daemonServer) handle(line []byte) error {
	m, ok, err := s.conn.request(line, "demo-daemon")
	if !ok {
		return err
	}
	switch m.Method {
	case "tools/list":
		return s.conn.respondValue(m.ID, map[string]any{"tools": []any{
			noArgTool("daemon_pid", "Returns the pid of this server and of the daemon it started.")}})
	case "tools/call":
		var p struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.Name != "daemon_pid" {
			return s.conn.failCode(m.ID, codeInvalidParams, "unknown tool; this server has daemon_pid")
		}
		text := fmt.Sprintf("server %d daemon %d", os.Getpid(), s.daemon)
		return s.conn.respondValue(m.ID, map[string]any{
			"content":           []any{map[string]any{"type": "text", "text": text}},
			"structuredContent": map[string]any{"server": os.Getpid(), "daemon": s.daemon},
		})
	default:
		return s.conn.failCode(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}
