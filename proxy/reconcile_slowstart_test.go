package proxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// fidelityAndHang is a workspace of two demo servers: fidelity, its tools
// prefixed with prefix, and, unless hangTimeout is "", hang, which never
// answers initialize and gives up at its connect_timeout of hangTimeout.
func fidelityAndHang(t *testing.T, prefix, hangTimeout string) *config.Workspace {
	t.Helper()
	yaml := fmt.Sprintf(`version: 1
servers:
  fidelity:
    truely-stateless: true
    command: '%[1]s'
    env: { %[2]s: fidelity }
    connect_timeout: 20s
    transform:
      - prefix: '%[3]s'
`, os.Args[0], demoEnv, prefix)
	if hangTimeout != "" {
		yaml += fmt.Sprintf(`  hang:
    truely-stateless: true
    command: '%s'
    env: { %s: 'misbehave hang-init' }
    connect_timeout: %s
`, os.Args[0], demoEnv, hangTimeout)
	}
	ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), []byte(yaml), nil)
	require.NotNil(t, ws, "problems: %v", problems)
	return ws
}

// TestSlowStartHoldsUpNeitherRelistNorClose: fidelity changes its tools at
// run time (add_tool); hang never answers initialize. While hang's start
// hangs
// (up to its connect_timeout of a minute), another server's list_changed is
// applied (the client hears of it and lists the new tool), and Close
// returns within its own bound, ending the reconcile with it.
func TestSlowStartHoldsUpNeitherRelistNorClose(t *testing.T) {
	p := newTestProxy(t)
	ws := fidelityAndHang(t, "fid_", "60s")

	c := connect(t, p)
	c.call("tools/list", map[string]any{}) // a client that listed hears of changes
	reconciled := make(chan Report, 1)
	go func() { reconciled <- p.Reconcile(context.Background(), ws, nil) }()
	// fidelity's tools are committed while hang still starts.
	c.waitNotifications("notifications/tools/list_changed", 1)
	require.Contains(t, toolNames(t, c.call("tools/list", map[string]any{}).Result), "fid_add_tool")

	assert.Contains(t, string(c.callTool("fid_add_tool", map[string]any{})), "added added_1")
	c.waitNotifications("notifications/tools/list_changed", 2)
	assert.Contains(t, toolNames(t, c.call("tools/list", map[string]any{}).Result), "fid_added_1",
		"the relist was committed while another server started")
	select {
	case <-reconciled:
		t.Fatal("the reconcile ended before hang's start did")
	default:
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closed := make(chan struct{})
	start := time.Now()
	go func() { p.Close(ctx); close(closed); t.Log("closed in", time.Since(start)) }()
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("Close waited for a server's start")
	}
	select {
	case report := <-reconciled:
		assert.Contains(t, report.Abandoned, "hang")
	case <-time.After(waitTimeout):
		t.Fatal("the reconcile went on after Close")
	}
}

// TestRelistDuringReconcileIsKept: a reconcile renames a running server's
// tools (a new prefix, no restart) and starts another that fails only at
// its connect_timeout. Meanwhile the running server adds a tool, which is
// committed at once under the new prefix; the reconcile's last commit,
// when the other start fails, keeps it rather than the list it began with.
func TestRelistDuringReconcileIsKept(t *testing.T) {
	p := newTestProxy(t)
	reconcile(t, p, fidelityAndHang(t, "fid_", ""))
	c := connect(t, p)
	require.Contains(t, toolNames(t, c.call("tools/list", map[string]any{}).Result), "fid_add_tool")

	reconciled := make(chan Report, 1)
	go func() {
		reconciled <- p.Reconcile(context.Background(), fidelityAndHang(t, "fx_", "10s"), nil)
	}()
	c.waitNotifications("notifications/tools/list_changed", 1) // the new prefix
	require.Contains(t, toolNames(t, c.call("tools/list", map[string]any{}).Result), "fx_add_tool")
	assert.Contains(t, string(c.callTool("fx_add_tool", map[string]any{})), "added added_1")
	c.waitNotifications("notifications/tools/list_changed", 2)
	require.Contains(t, toolNames(t, c.call("tools/list", map[string]any{}).Result), "fx_added_1")
	select {
	case <-reconciled:
		t.Fatal("the reconcile ended before hang's start failed: the test shows nothing")
	default:
	}

	select {
	case report := <-reconciled:
		assert.Contains(t, report.Failed, "hang")
	case <-time.After(waitTimeout):
		t.Fatal("hang's start did not end at its connect_timeout")
	}
	assert.Contains(t, toolNames(t, c.call("tools/list", map[string]any{}).Result), "fx_added_1",
		"the reconcile's last commit kept the tool added while it ran")
}
