package config

import (
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// A config file holds the servers of one gateway: dozens in practice. These bounds sit
// far above any real config and keep a wrong file (a log, a dump, a generated file gone
// astray) from taking the machine's memory: reading a file costs several times its
// size in memory, however fast it is read.
const (
	// MaxFileSize is the largest config file read, in bytes (16 MiB).
	MaxFileSize = 16 << 20
	// MaxServers is the most servers one config file may define.
	MaxServers = 50_000
)

// ErrFileTooLarge is ReadFile's error for a file larger than MaxFileSize.
var ErrFileTooLarge = errors.New("file too large")

// ReadFile reads a config file, refusing one larger than MaxFileSize with
// ErrFileTooLarge before reading it whole.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %s", ErrFileTooLarge, tooLarge(st.Size()))
	}
	// A file that grows while it is read, or is not a regular file, is cut here.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s", ErrFileTooLarge, tooLarge(-1))
	}
	return data, nil
}

// tooLarge says why a file of size bytes (-1: unknown) is not read and what to do.
func tooLarge(size int64) string {
	what := "it is larger than"
	if size >= 0 {
		what = fmt.Sprintf("it has %d bytes, more than", size)
	}
	return fmt.Sprintf("%s the %d MiB a config file may be (10,000 servers take about 2 MiB); check that this is the config file you meant",
		what, MaxFileSize>>20)
}

// tooManyServers reports a servers mapping with more than MaxServers entries as a
// workspace-level error; true means the file is not to be read further.
func tooManyServers(r *reader, n *yaml.Node) bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode || len(n.Content)/2 <= MaxServers {
		return false
	}
	r.errorf(n.Line, "servers", "%d servers, more than the %d a config file may define; check that this is the config file you meant",
		len(n.Content)/2, MaxServers)
	return true
}
