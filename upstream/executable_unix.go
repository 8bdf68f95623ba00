//go:build !windows

package upstream

import "os"

// executable reports whether p is a file someone may execute.
func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0
}
