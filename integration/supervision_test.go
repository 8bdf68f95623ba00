package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The supervision tests check that nothing an upstream starts outlives it, even a
// daemon that left the upstream's process group with setsid() and ignores SIGTERM (the
// demo server "daemon"), and that every instance is accounted for: caps with defaults,
// recycling, and the instance list of mcp_status.
//
// The aggregator tracks an instance's processes with a cgroup of its own where cgroup
// v2 is writable, and otherwise as a child subreaper with tags in the environment. The
// tests run each scenario both ways where the machine allows: "auto" takes whatever
// the machine offers, "subreaper" forces the second path (serve --cgroups off). Every
// run logs which path it took.

// supervisionPath is one way to run the aggregator's process supervision.
type supervisionPath struct {
	name  string
	flags []string
}

var supervisionPaths = []supervisionPath{
	{"auto", nil},
	{"subreaper", []string{"--cgroups", "off"}},
}

// eachSupervisionPath runs test as a parallel subtest per supervision path.
func eachSupervisionPath(t *testing.T, test func(t *testing.T, path supervisionPath)) {
	for _, p := range supervisionPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			test(t, p)
		})
	}
}

// supervisionMode reads how the aggregator tracks processes from mcp_status, logs it,
// and checks that it is what the path asked for.
func supervisionMode(t *testing.T, c *client, path supervisionPath) string {
	t.Helper()
	var st struct {
		Supervision string `json:"supervision"`
	}
	text := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
	require.NoError(t, json.Unmarshal([]byte(text), &st), "mcp_status: %s", text)
	t.Logf("process supervision path: %s", st.Supervision)
	if path.flags != nil {
		require.Equal(t, "subreaper", st.Supervision, "--cgroups off")
	} else {
		require.Contains(t, []string{"cgroup", "subreaper"}, st.Supervision)
	}
	return st.Supervision
}

// supDaemonConfig serves the daemon demo server, leased per session.
func supDaemonConfig() string {
	return "version: 1\nservers:\n  daemon:\n    " + demoServer("daemon") + "\n"
}

// supIDs returns the parent, process group and session of a running process.
func supIDs(pid int) (ppid, pgrp, sid int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	f := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	if len(f) < 4 || f[0][0] == 'Z' {
		return 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(string(f[1]))
	pgrp, _ = strconv.Atoi(string(f[2]))
	sid, _ = strconv.Atoi(string(f[3]))
	return ppid, pgrp, sid, true
}

// supDaemonTree leases this session an instance of the daemon server and returns the
// server, its daemon and the aggregator's reaper, after checking that the daemon
// escaped the server the way real daemons do, and was re-parented to the aggregator.
func supDaemonTree(t *testing.T, a *aggregator, c *client, mode string) relTree {
	t.Helper()
	s := structured(t, c.callToolResult("daemon_pid", map[string]any{}))
	server64, err := s["server"].(json.Number).Int64()
	require.NoError(t, err)
	daemon64, err := s["daemon"].(json.Number).Int64()
	require.NoError(t, err)
	server, daemon := int(server64), int(daemon64)

	_, serverGroup, serverSession, ok := supIDs(server)
	require.True(t, ok, "the daemon server (pid %d) runs", server)
	ppid, group, session, ok := supIDs(daemon)
	require.True(t, ok, "the daemon (pid %d) runs", daemon)
	assert.NotEqual(t, serverGroup, group, "the daemon left the server's process group")
	assert.NotEqual(t, serverSession, session, "the daemon runs in a session of its own")
	assert.Equal(t, a.cmd.Process.Pid, ppid, "the orphaned daemon was re-parented to the aggregator, a child subreaper")
	if mode == "cgroup" {
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", daemon))
		require.NoError(t, err)
		assert.Contains(t, string(cg), "/mcp-aggregator-", "the daemon is in its instance's cgroup")
	}
	tree := relTree{"server": server, "daemon": daemon, "reaper": relReaperPID(t, a.marker)}
	for name, pid := range tree {
		requireMarked(t, a.marker, pid)
		require.True(t, relRunning(pid), "%s (pid %d) runs", name, pid)
	}
	return tree
}

var reaperRestarted = regexp.MustCompile(`msg="reaper restarted" pid=(\d+)`)

// supKillReaper SIGKILLs the aggregator's reaper and waits until the aggregator has
// started another, which it returns.
func supKillReaper(t *testing.T, a *aggregator, reaper int) int {
	t.Helper()
	require.NoError(t, syscall.Kill(reaper, syscall.SIGKILL))
	line := relLogLine(t, a, startTimeout, `msg="reaper restarted"`)
	next, err := strconv.Atoi(reaperRestarted.FindStringSubmatch(line)[1])
	require.NoError(t, err)
	assert.NotEqual(t, reaper, next)
	requireMarked(t, a.marker, next)
	assert.True(t, relRunning(next), "the new reaper runs")
	assert.False(t, relRunning(reaper), "the killed reaper is gone")
	return next
}

// supWaitReaped waits until none of pids exists at all, not even as a zombie: the
// daemon is the aggregator's child once orphaned, so the aggregator must reap it.
func supWaitReaped(t *testing.T, pids relTree) {
	t.Helper()
	relWaitNone(t, pids, survivorTimeout, "not reaped %s later: %v", func(name string, pid int) (string, bool) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return "", false
		}
		state, _, _ := relProcStat(pid)
		return fmt.Sprintf("%s (pid %d, state %c)", name, pid, state), true
	})
}

// supEnd is how a scenario ends the daemon's instance.
type supEnd string

const (
	endSIGTERM supEnd = "SIGTERM"
	endSIGKILL supEnd = "SIGKILL"
	endRelease supEnd = "release"
)

// supDaemonScenario leases a daemon server instance, optionally kills the reaper
// first, ends the instance as end says, and checks that the server, its daemon and
// (when the aggregator ends) the reaper are all gone.
func supDaemonScenario(t *testing.T, path supervisionPath, end supEnd, reaperFirst bool) {
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, supDaemonConfig())}, flags: path.flags})
	a.waitLoaded()
	c := a.connect()
	mode := supervisionMode(t, c, path)
	tree := supDaemonTree(t, a, c, mode)
	if reaperFirst {
		tree["reaper"] = supKillReaper(t, a, tree["reaper"])
		require.True(t, relRunning(tree["daemon"]), "killing the reaper kills nothing")
	}

	switch end {
	case endSIGTERM:
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 0, relWaitExit(t, a, "SIGTERM"), "the aggregator's exit code; stderr:\n%s", a.log)
		relForgetSession(c)
	case endSIGKILL:
		a.kill()
		relForgetSession(c)
	case endRelease:
		text := firstText(t, c.callToolResult("mcp_release", map[string]any{"serverId": "daemon"}))
		assert.Contains(t, text, "released")
		delete(tree, "reaper") // the aggregator and its reaper serve on
		relWaitGone(t, tree, survivorTimeout)
		supWaitReaped(t, tree)
		select {
		case <-a.exited:
			t.Fatal("the aggregator exited")
		default:
		}
		// A new lease starts a new instance, with a new daemon: the aggregator is fine.
		next := supDaemonTree(t, a, c, mode)
		assert.NotEqual(t, tree["daemon"], next["daemon"])
		return // stop, at cleanup, checks that nothing of the tree survives
	}
	relWaitGone(t, tree, survivorTimeout)
	// stop (at cleanup) also scans the whole marked tree.
}

func TestSupervisionDaemonGoneAfterSIGTERM(t *testing.T) {
	t.Parallel()
	eachSupervisionPath(t, func(t *testing.T, path supervisionPath) {
		supDaemonScenario(t, path, endSIGTERM, false)
	})
}

func TestSupervisionDaemonGoneAfterSIGKILL(t *testing.T) {
	t.Parallel()
	eachSupervisionPath(t, func(t *testing.T, path supervisionPath) {
		supDaemonScenario(t, path, endSIGKILL, false)
	})
}

func TestSupervisionDaemonGoneAfterRelease(t *testing.T) {
	t.Parallel()
	eachSupervisionPath(t, func(t *testing.T, path supervisionPath) {
		supDaemonScenario(t, path, endRelease, false)
	})
}

// TestSupervisionReaperKilledFirst kills the reaper before the instance ends: the
// aggregator notices, starts a new reaper and tells it everything, so the daemon goes
// however the aggregator ends afterwards.
func TestSupervisionReaperKilledFirst(t *testing.T) {
	t.Parallel()
	for _, end := range []supEnd{endSIGTERM, endSIGKILL, endRelease} {
		t.Run(string(end), func(t *testing.T) {
			t.Parallel()
			eachSupervisionPath(t, func(t *testing.T, path supervisionPath) {
				supDaemonScenario(t, path, end, true)
			})
		})
	}
}

// TestSupervisionTagsEveryProcess checks the environment mark the subreaper path
// finds escaped processes by: the daemon carries its instance's tag.
func TestSupervisionTagsEveryProcess(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{writeConfig(t, supDaemonConfig())}, flags: []string{"--cgroups", "off"}})
	a.waitLoaded()
	c := a.connect()
	tree := supDaemonTree(t, a, c, supervisionMode(t, c, supervisionPaths[1]))
	tag := func(pid int) string {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		require.NoError(t, err)
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "MCP_AGGREGATOR_UPSTREAM="); ok {
				return v
			}
		}
		return ""
	}
	serverTag := tag(tree["server"])
	assert.Regexp(t, `^`+strconv.Itoa(a.cmd.Process.Pid)+`\.\d+\.[0-9a-f]+:\d+$`, serverTag, "<aggregator pid>.<start>.<random>:<instance>")
	assert.Equal(t, serverTag, tag(tree["daemon"]), "the daemon inherited its server's tag")
	assert.Empty(t, tag(tree["reaper"]), "the reaper is no upstream")
}
