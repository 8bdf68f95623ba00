package integration

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// conformanceServerPkg is mcp-go's own server for the official conformance suite. It
// is a main package inside the mcp-go module that go.mod requires, so "go build"
// takes it from the module cache at exactly the pinned version.
const conformanceServerPkg = "github.com/mark3labs/mcp-go/examples/conformance"

// buildConformanceServer builds mcp-go's conformance server and returns the
// executable's path.
func buildConformanceServer(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "mcp-go-conformance")
	build := exec.Command("go", "build", "-o", exe, conformanceServerPkg)
	build.Dir = ".." // the module root: go test runs in the package directory
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building %s:\n%s", conformanceServerPkg, out)
	return exe
}

// startConformanceServer runs the conformance server on a free loopback port until
// the test ends and returns its streamable-HTTP endpoint.
func startConformanceServer(t *testing.T, exe string) string {
	t.Helper()
	addr := freeAddr(t)

	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "CONFORMANCE_ADDR="+addr)
	log, exited := startProcessGroup(t, cmd)

	// It logs that it listens before it binds the port, so its /health endpoint is
	// the only sign that it is ready.
	require.True(t, awaitHealthy("http://"+addr+"/health", exited),
		"the conformance server on %s never became healthy:\n%s", addr, log)
	return "http://" + addr + "/mcp"
}

// awaitHealthy polls a health endpoint until it answers 200, the process exits or
// startTimeout passes.
func awaitHealthy(url string, exited <-chan struct{}) bool {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.After(startTimeout)
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-exited:
			return false
		case <-deadline:
			return false
		case <-time.After(20 * time.Millisecond): // a bind sends no event
		}
	}
}
