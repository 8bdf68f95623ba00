package reload

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// waitFor bounds how long a test waits for an event that is due.
const waitFor = 30 * time.Second

// testLoop is a Loop over a real proxy and the config file of the test's
// own, whose Load tells loads on a channel.
func testLoop(t *testing.T) (*Loop, string, <-chan struct{}, chan os.Signal) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp-aggregator.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: {}\n"), 0o600))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := proxy.New(proxy.Options{Logger: log, Version: "test"})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		p.Close(ctx)
	})
	loads := make(chan struct{}, 16)
	hup := make(chan os.Signal, 1)
	l := &Loop{Proxy: p, Paths: []string{path}, Settle: DefaultSettle, Signals: hup, Logger: log,
		Load: func() (*config.Workspace, []config.Problem) {
			loads <- struct{}{}
			return config.LoadExisting([]string{path}, os.LookupEnv)
		}}
	return l, path, loads, hup
}

func waitLoad(t *testing.T, loads <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-loads:
	case <-time.After(waitFor):
		t.Fatalf("no load: %s", why)
	}
}

// A reload asked for while the first load runs is not lost: the config is
// read at once (for the starts it no longer wants), and reloaded once the
// first load ends. A signal and a change of the file reload.
func TestReloadsAfterTheLoadUnderWay(t *testing.T) {
	l, path, loads, hup := testLoop(t)
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, func() (*config.Workspace, bool) {
			<-release // the first load hangs until the test lets it go
			return nil, true
		})
	}()

	hup <- syscall.SIGHUP
	waitLoad(t, loads, "the config is read when a signal comes during the first load")
	select {
	case <-loads:
		t.Fatal("reloaded before the load under way ended")
	default:
	}
	close(release)
	waitLoad(t, loads, "the reload asked for runs once the first load ends")

	hup <- syscall.SIGHUP
	waitLoad(t, loads, "a signal reloads")

	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: {}\n# edited\n"), 0o600))
	waitLoad(t, loads, "a change of the config file reloads")

	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not end with its context")
	}
}

// A first load that reports the aggregator cannot go on ends the loop.
func TestFirstLoadThatFailsEndsTheLoop(t *testing.T) {
	l, _, _, _ := testLoop(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(context.Background(), func() (*config.Workspace, bool) { return nil, false })
	}()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run went on after its first load failed")
	}
}

// A reload returns the workspace it applied, and nil for a config that
// does not load: the running config stays.
func TestReloadKeepsTheRunningConfigWhenRejected(t *testing.T) {
	l, path, loads, _ := testLoop(t)
	ws := l.reload(context.Background())
	<-loads
	require.NotNil(t, ws)
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: [\n"), 0o600))
	assert.Nil(t, l.reload(context.Background()), "a config that does not parse is rejected")
	<-loads
	assert.Empty(t, l.Proxy.Servers(), "nothing was started from it")
}

func TestTiming(t *testing.T) {
	assert.Equal(t, settleLimit, Timing(DefaultSettle).SettleLimit)
	assert.Equal(t, settleTimes*time.Second, Timing(time.Second).SettleLimit, "a long settle period waits for that many of them")
}
