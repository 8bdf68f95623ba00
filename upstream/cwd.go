package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// workDirError explains why dir cannot be a process's working directory, or
// returns nil when it can (or when dir is empty: the aggregator's own).
func workDirError(dir string) error {
	if dir == "" {
		return nil
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("working directory (cwd) %q does not exist; create it or fix cwd in the config: %w", dir, err)
	case err != nil:
		return fmt.Errorf("working directory (cwd) %q cannot be used; fix cwd in the config or the directory's permissions: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("working directory (cwd) %q is not a directory; set cwd to the directory the server should run in: %w",
			dir, &fs.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR})
	}
	return nil
}
