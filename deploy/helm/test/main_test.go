package charttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain provides helm and mcp-aggregator to every test through $HELM and
// $MCP_AGGREGATOR_BIN, unless they are set already: helm built once from
// the Go module proxy into the user's cache (like the Node.js of .ci/run),
// and mcp-aggregator built from this repository for this run.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "charttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := provide(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// provide sets $HELM and $MCP_AGGREGATOR_BIN where they are not set,
// building mcp-aggregator into dir.
func provide(dir string) error {
	if os.Getenv("HELM") == "" {
		helm, err := cachedHelm()
		if err != nil {
			return err
		}
		os.Setenv("HELM", helm)
	}
	if os.Getenv("MCP_AGGREGATOR_BIN") == "" {
		bin := filepath.Join(dir, "mcp-aggregator")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcp-aggregator")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", cmd, err, out)
		}
		os.Setenv("MCP_AGGREGATOR_BIN", bin)
	}
	return nil
}

// cachedHelm returns helm at the version of helmModule, installing it into
// the user's cache directory the first time.
func cachedHelm() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for helm (%w); set HELM to a helm binary", err)
	}
	_, version, _ := strings.Cut(helmModule, "@")
	dir := filepath.Join(cache, "mcp-aggregator", "helm-"+version)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command("go", "install", helmModule)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	return bin, nil
}
