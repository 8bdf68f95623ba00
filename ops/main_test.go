package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// TestMain lets this test binary stand in for the upstream servers, so the
// proxy the endpoints read fronts real processes.
func TestMain(m *testing.M) { testproc.Main(m) }

// rig is a proxy with its recorder and endpoints.
type rig struct {
	proxy   *proxy.Proxy
	rec     *Recorder
	ops     *Ops
	secrets *redact.Set
}

func newRig(t *testing.T) *rig {
	t.Helper()
	rec := NewRecorder(3)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := proxy.New(proxy.Options{Logger: log, Version: "test", Observer: rec,
		Upstream: upstream.Options{StdinGrace: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testproc.WaitTimeout)
		defer cancel()
		p.Close(ctx)
	})
	secrets := &redact.Set{}
	return &rig{proxy: p, rec: rec, secrets: secrets, ops: New(p, rec, Options{Logger: log, Version: "1.2.3-test", Secrets: secrets})}
}

// demoConfig is a stateless demo tools server plus whatever extra says.
func demoConfig(extra string) string {
	return fmt.Sprintf(`version: 1
servers:
  tools:
    truely-stateless: true
    command: %q
    env: { %s: tools }
    connect_timeout: 20s
%s`, os.Args[0], testproc.DemoEnv, extra)
}

// load reconciles the proxy to yaml and returns the report.
func (r *rig) load(t *testing.T, yaml string, problems ...config.Problem) proxy.Report {
	t.Helper()
	ws, loadProblems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), []byte(yaml), nil)
	require.NotNil(t, ws, "problems: %v", loadProblems)
	ctx, cancel := context.WithTimeout(context.Background(), testproc.WaitTimeout)
	defer cancel()
	return r.proxy.Reconcile(ctx, ws, append(loadProblems, problems...))
}
