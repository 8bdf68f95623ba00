package oauth

import "runtime"

// isWindows: file modes there do not say who may read a file.
func isWindows() bool { return runtime.GOOS == "windows" }
