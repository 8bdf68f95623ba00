//go:build unix

package pipeio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockingPipe is a pipe in blocking mode, as a client hands a process its
// stdin and stdout (os.Pipe's are non-blocking).
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	r, w = os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	t.Cleanup(func() { _, _ = r.Close(), w.Close() })
	return r, w
}

// isNonblocking reports whether f's descriptor is in non-blocking mode.
func isNonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	raw, err := f.SyscallConn()
	require.NoError(t, err)
	return nonBlocking(raw)
}

// A pipe or a socket in blocking mode is made a Pipe of the poller, its
// descriptor non-blocking while it is; restore puts the mode back.
func TestPollMakesPipesAndSocketsPollable(t *testing.T) {
	t.Parallel()
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	a, b := os.NewFile(uintptr(pair[0]), "a"), os.NewFile(uintptr(pair[1]), "b")
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	r, w := blockingPipe(t)
	for name, ends := range map[string][2]*os.File{"pipe": {r, w}, "socket": {a, b}} {
		t.Run(name, func(t *testing.T) {
			from, to := ends[1], ends[0]
			require.False(t, isNonblocking(t, to))
			in, restoreIn, ok := Poll(to)
			require.True(t, ok)
			out, restoreOut, ok := Poll(from)
			require.True(t, ok)
			assert.True(t, in.Direct(), "read with direct system calls")
			assert.True(t, out.Direct())
			assert.True(t, isNonblocking(t, to), "the mode is the shared descriptor's")
			assert.True(t, isNonblocking(t, from))

			// A read waits through the poller until the other end writes.
			got := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(in).ReadString('\n')
				got <- line
			}()
			_, err := out.Write([]byte("hello\n"))
			require.NoError(t, err)
			assert.Equal(t, "hello\n", <-got)

			restoreIn()
			restoreOut()
			assert.False(t, isNonblocking(t, to), "restored to blocking mode")
			assert.False(t, isNonblocking(t, from))
			// The originals work on as they did.
			_, err = from.Write([]byte("again\n"))
			require.NoError(t, err)
			buf := make([]byte, 6)
			_, err = io.ReadFull(to, buf)
			require.NoError(t, err)
			assert.Equal(t, "again\n", string(buf))
		})
	}
}

// A regular file, a terminal or a device is left as it is: no Pipe, the
// mode unchanged.
func TestPollLeavesFilesAndTerminalsAlone(t *testing.T) {
	t.Parallel()
	files := map[string]*os.File{}
	reg, err := os.Create(filepath.Join(t.TempDir(), "regular"))
	require.NoError(t, err)
	files["regular file"] = reg
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		files["device"] = null
	}
	if tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0); err == nil {
		files["terminal"] = tty // the master side of a new pseudo-terminal
	}
	for name, f := range files {
		t.Cleanup(func() { _ = f.Close() })
		t.Run(name, func(t *testing.T) {
			before := isNonblocking(t, f)
			p, restore, ok := Poll(f)
			assert.False(t, ok)
			assert.Nil(t, p)
			assert.Nil(t, restore)
			assert.Equal(t, before, isNonblocking(t, f), "the mode is left as it was")
		})
	}
}

// Files that are not the process's own stdin and stdout are returned as
// they are, pipes or not.
func TestPollStdioTakesOnlyTheProcesssOwn(t *testing.T) {
	t.Parallel()
	r, w := blockingPipe(t)
	in, out, polled, restore := PollStdio(r, w)
	assert.Same(t, r, in)
	assert.Same(t, w, out)
	assert.False(t, polled)
	assert.False(t, isNonblocking(t, r))
	restore()
	var buf bytes.Buffer
	in, out, polled, restore = PollStdio(&buf, &buf)
	assert.Equal(t, io.Reader(&buf), in)
	assert.Equal(t, io.Writer(&buf), out)
	assert.False(t, polled)
	restore()
}

// stdioChild makes the test binary run stdioChildReport as the process
// whose stdin and stdout are under test.
const stdioChild = "PIPEIO_STDIO_CHILD"

// stdioReport is what the child reports on stderr.
type stdioReport struct {
	Polled         bool `json:"polled"`
	InPipe         bool `json:"in_pipe"`  // in is a Pipe making direct calls
	OutPipe        bool `json:"out_pipe"` // likewise out
	NonblockingIn  bool `json:"nonblocking_in"`
	NonblockingOut bool `json:"nonblocking_out"`
	RestoredIn     bool `json:"restored_in"` // blocking again after restore
	RestoredOut    bool `json:"restored_out"`
}

// TestPollStdioChild is the child's side of the tests below; it does
// nothing in a test run of its own.
func TestPollStdioChild(t *testing.T) {
	if os.Getenv(stdioChild) != "1" {
		t.Skip("run by the stdio tests as a child process")
	}
	in, out, polled, restore := PollStdio(os.Stdin, os.Stdout)
	rep := stdioReport{Polled: polled, NonblockingIn: isNonblocking(t, os.Stdin), NonblockingOut: isNonblocking(t, os.Stdout)}
	if p, ok := in.(*Pipe); ok {
		rep.InPipe = p.Direct()
	}
	if p, ok := out.(*Pipe); ok {
		rep.OutPipe = p.Direct()
	}
	// Echo one line, through what PollStdio gave.
	line, _ := bufio.NewReader(in).ReadString('\n')
	_, _ = io.WriteString(out, "echo "+line)
	restore()
	rep.RestoredIn, rep.RestoredOut = !isNonblocking(t, os.Stdin), !isNonblocking(t, os.Stdout)
	_ = json.NewEncoder(os.Stderr).Encode(rep)
}

// runStdioChild runs TestPollStdioChild with stdin and stdout given, and
// returns its report.
func runStdioChild(t *testing.T, stdin, stdout *os.File) stdioReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPollStdioChild$")
	cmd.Env = append(os.Environ(), stdioChild+"=1")
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	var rep stdioReport
	line, _, _ := bytes.Cut(stderr.Bytes(), []byte("\n"))
	require.NoError(t, json.Unmarshal(line, &rep), stderr.String())
	return rep
}

// The process's own stdin and stdout, pipes in blocking mode as a client
// hands them over, are read and written through the poller, and are in
// blocking mode again after restore.
func TestPollStdioOnThePipesOfAClient(t *testing.T) {
	t.Parallel()
	inR, inW := blockingPipe(t)
	outR, outW := blockingPipe(t)
	_, err := inW.Write([]byte("hello\n"))
	require.NoError(t, err)
	require.NoError(t, inW.Close())
	rep := runStdioChild(t, inR, outW)
	assert.Equal(t, stdioReport{Polled: true, InPipe: true, OutPipe: true, NonblockingIn: true, NonblockingOut: true,
		RestoredIn: true, RestoredOut: true}, rep)
	require.NoError(t, outW.Close())
	line, _ := bufio.NewReader(outR).ReadString('\n')
	assert.Equal(t, "echo hello\n", line)
}

// Regular files as stdin and stdout are left as they are: not polled, so
// the server keeps every processor.
func TestPollStdioLeavesFilesAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in"), []byte("hello\n"), 0o600))
	in, err := os.Open(filepath.Join(dir, "in"))
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, "out"))
	require.NoError(t, err)
	defer out.Close()
	rep := runStdioChild(t, in, out)
	assert.Equal(t, stdioReport{RestoredIn: true, RestoredOut: true}, rep)
	got, err := os.ReadFile(filepath.Join(dir, "out"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(got, []byte("echo hello\n")), "%q", got)
}
