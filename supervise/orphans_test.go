//go:build linux

package supervise

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// TestSubreaperReapsOrphansThatLeftTheirGroup: an upstream's helper that put
// itself in a process group of its own (setpgid, as job control and
// process_group=0 do) and was orphaned is re-parented to the aggregator. Once
// it dies it is reaped, even when it was never seen alive: otherwise every
// such helper would stay a zombie, holding its pid, for as long as the
// aggregator runs.
func TestSubreaperReapsOrphansThatLeftTheirGroup(t *testing.T) {
	require.NoError(t, becomeSubreaper())
	// What such an orphan looks like to us: our child, in a group of its
	// own, in our session, forked by nobody we asked.
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	testproc.RequireReaped(t, pid)
}
