//go:build linux

package memtrim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileRSS is the KiB of the process's resident set that map files.
func fileRSS(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	require.NoError(t, err)
	var rss, anon int64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			rss = n
		case "Anonymous:":
			anon = n
		}
	}
	return rss - anon
}

// TestTrimDropsFilePages: the pages of the test binary its start touched
// leave the resident set.
func TestTrimDropsFilePages(t *testing.T) {
	before := fileRSS(t)
	Trim()
	after := fileRSS(t)
	assert.Less(t, after, before/2, "file-backed KiB before %d, after %d", before, after)
}

// TestTrimKeepsCopiedPages: a read-only private mapping that holds a page
// the process wrote (a copy-on-write copy) is not dropped: its content
// would go back to the file's.
func TestTrimKeepsCopiedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("f", 8192)), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer syscall.Munmap(mem)
	mem[0] = 'w' // the first page is now the process's own
	require.NoError(t, syscall.Mprotect(mem, syscall.PROT_READ))
	_ = mem[4096] // the second is the file's
	Trim()
	assert.Equal(t, byte('w'), mem[0], "the written page was dropped")
	assert.Equal(t, byte('f'), mem[4096])
}
