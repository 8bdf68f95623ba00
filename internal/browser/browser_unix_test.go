//go:build unix

package browser

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeOpener puts a script named as the system's opener first on PATH: it
// writes the URL it is given to the FIFO record, then waits until the test
// writes a line to the FIFO hold, and exits with that line as its status.
func fakeOpener(t *testing.T) (record, hold string) {
	t.Helper()
	dir := t.TempDir()
	record, hold = filepath.Join(dir, "record"), filepath.Join(dir, "hold")
	require.NoError(t, syscall.Mkfifo(record, 0o600))
	require.NoError(t, syscall.Mkfifo(hold, 0o600))
	name, _ := opener("")
	script := "#!/bin/sh\n" +
		"for arg; do url=$arg; done\n" + // the last argument
		"printf '%s\\n' \"$url\" > \"$OPENER_RECORD\"\n" +
		"read status < \"$OPENER_HOLD\"\n" +
		"exit \"$status\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700))
	t.Setenv("PATH", dir)
	t.Setenv("OPENER_RECORD", record)
	t.Setenv("OPENER_HOLD", hold)
	return record, hold
}

// readFIFO reads what the opener writes to the FIFO at path: opening it
// waits for the opener to open it too.
func readFIFO(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// writeFIFO releases the opener waiting on the FIFO at path.
func writeFIFO(t *testing.T, path, line string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(line+"\n"), 0o600))
}

// lines is a writer whose each write is a line the test can wait for.
type lines chan string

func (l lines) Write(b []byte) (int, error) { l <- string(b); return len(b), nil }

// Open starts the opener with the URL and returns while the opener still
// runs: the opener waits for the test, which releases it only once Open
// has returned (an Open that waited would never return).
func TestOpenDoesNotWaitForTheOpener(t *testing.T) {
	record, hold := fakeOpener(t)
	const url = "https://auth.example.com/authorize?client_id=a&state=b c"
	Open(url, io.Discard)
	assert.Equal(t, url+"\n", readFIFO(t, record), "the opener is given the URL as one argument")
	writeFIFO(t, hold, "0")
}

// An opener that fails says so when it exits, and one that cannot start at
// once; each time with the advice to open the URL by hand.
func TestOpenReportsAnOpenerThatFails(t *testing.T) {
	record, hold := fakeOpener(t)
	problems := make(lines, 1)
	Open("https://auth.example.com/authorize", problems)
	readFIFO(t, record)
	writeFIFO(t, hold, "3")
	p := <-problems
	assert.Contains(t, p, "exit status 3")
	assert.True(t, strings.HasSuffix(p, "open the URL above by hand\n"), p)

	t.Setenv("PATH", t.TempDir()) // no opener at all
	var out strings.Builder
	Open("https://auth.example.com/authorize", &out)
	assert.Contains(t, out.String(), "could not open a browser")
	assert.Contains(t, out.String(), "open the URL above by hand")
}
