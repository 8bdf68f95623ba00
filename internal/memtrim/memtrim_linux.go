//go:build linux

package memtrim

import (
	"bufio"
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
)

// Trim returns the heap's free memory to the system (after a collection)
// and drops the process's mapped pages of files from its resident set.
func Trim() {
	debug.FreeOSMemory()
	dropFilePages()
}

// dropFilePages takes the pages of files that the process has mapped
// read-only (the binary's code and read-only data, which every package's
// initialisation touches, and the C library's) out of its resident set;
// the kernel maps back the few it uses again. The pages stay in the page
// cache, shared with every process of the same binary. Only private
// read-only mappings of a file that hold no page of the process's own
// (Anonymous: a copy-on-write copy) are dropped: MADV_DONTNEED on such a
// mapping loses nothing.
func dropFilePages() {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	type mapping struct {
		start, end uintptr
		ok         bool
	}
	var cur mapping
	var drop []mapping
	flush := func() {
		if cur.ok {
			drop = append(drop, cur)
		}
		cur = mapping{}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if bytes.IndexByte(f[0], '-') > 0 && len(f) >= 5 { // a mapping's header line
			flush()
			lo, hi, _ := bytes.Cut(f[0], []byte("-"))
			start, err1 := strconv.ParseUint(string(lo), 16, 64)
			end, err2 := strconv.ParseUint(string(hi), 16, 64)
			perms := f[1]
			cur = mapping{start: uintptr(start), end: uintptr(end),
				ok: err1 == nil && err2 == nil && len(f) >= 6 && bytes.HasPrefix(f[5], []byte("/")) &&
					len(perms) == 4 && perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p'}
			continue
		}
		// A field of the current mapping: keep it only if nothing in it is the process's own.
		if len(f) == 3 && string(f[0]) == "Anonymous:" && string(f[1]) != "0" {
			cur.ok = false
		}
	}
	flush()
	for _, m := range drop {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED)
	}
}
