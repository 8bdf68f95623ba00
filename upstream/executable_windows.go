package upstream

import (
	"os"
	"path/filepath"
	"strings"
)

// executable reports whether p, or p with one of PATHEXT's extensions, is a file.
func executable(p string) bool {
	candidates := []string{p}
	if filepath.Ext(p) == "" {
		for _, ext := range strings.Split(os.Getenv("PATHEXT"), ";") {
			if ext != "" {
				candidates = append(candidates, p+ext)
			}
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}
