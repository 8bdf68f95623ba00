//go:build unix && !linux

package supervise

import (
	"errors"
	"log/slog"
	"os/exec"
)

// Subreapers, cgroups and /proc are Linux's; elsewhere a Supervisor runs in
// ModeProcessGroup and these stand-ins do nothing.

var errLinuxOnly = errors.New("only available on Linux")

func becomeSubreaper() error { return errLinuxOnly }

func newCgroupTree(string, *slog.Logger) (*cgroupTree, error) { return nil, errLinuxOnly }

type cgroupTree struct{ dir string }

func (t *cgroupTree) create(string) (*cgroupDir, error) { return nil, errLinuxOnly }
func (t *cgroupTree) close()                            {}

type cgroupDir struct{ fd int }

func (d *cgroupDir) started()        {}
func (d *cgroupDir) kill()           {}
func (d *cgroupDir) remove()         {}
func (d *cgroupDir) populated() bool { return false }

// children only starts processes here: without a subreaper no orphan is
// ever ours to reap.
var children childTable

type childTable struct{}

func (childTable) start(cmd *exec.Cmd) error { return cmd.Start() }
func (childTable) reaped(int)                {}
func (childTable) sweep()                    {}

func selfStart() uint64 { return 0 }

// reapLeftovers: without /proc or cgroups the reaper kills groups only.
func reapLeftovers(cgroupDir, runID string) {}
