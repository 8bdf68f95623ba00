package clientconfig

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Command is the absolute path a client should start this binary by: the one
// the command line named it by (arg0: a name found on the user's PATH, or a
// path) when that leads to this very file, since a package manager's symlink
// there outlives an upgrade that replaces its target; else the executable
// itself, symlinks resolved.
func Command(arg0 string) (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", err
	}
	if arg0 == "" {
		return exe, nil
	}
	named, err := exec.LookPath(arg0)
	if err != nil {
		return exe, nil
	}
	if named, err = filepath.Abs(named); err != nil {
		return exe, nil
	}
	if real, err := filepath.EvalSymlinks(named); err != nil || real != exe {
		return exe, nil
	}
	return named, nil
}

// TemporaryBuild reports whether command is a binary `go run` built in a
// temporary directory, which is gone once it exits.
func TemporaryBuild(command string) bool {
	return strings.Contains(command, "go-build")
}

// Pin makes the config files absolute, so that a client starting the
// aggregator elsewhere reads the same files, and names those that do not
// exist yet.
func Pin(paths []string) (abs, missing []string) {
	for _, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			a = p
		}
		if _, err := os.Stat(a); err != nil {
			missing = append(missing, a)
		}
		abs = append(abs, a)
	}
	return abs, missing
}
