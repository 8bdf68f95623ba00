package integration

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// artifactsVar names the directory where tests leave files for people to look at
// (screenshots); without it they go to a new directory under the system's
// temporary directory, which the test logs and keeps.
const artifactsVar = "MCP_AGGREGATOR_ARTIFACTS"

// artifactDir returns the directory for t's artifacts.
func artifactDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv(artifactsVar)
	if root == "" {
		dir, err := os.MkdirTemp("", "mcp-aggregator-artifacts-")
		require.NoError(t, err)
		root = dir
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("artifacts of this test: %s", dir)
	return dir
}

// chromiumPath finds Debian's chromium (.ci/run installs it) and skips t when it is
// not installed.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("chromium is not installed: apt-get install -y --no-install-recommends chromium (.ci/run does)")
	return ""
}

// browser starts a headless chromium of its own (a fresh profile, no network of
// its own making) and returns a tab's context, whose errors it collects.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	b := &browser{ctx: ctx}
	// The first use starts the browser; it lives as long as ctx.
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.errors = append(b.errors, fmt.Sprintf("exception: %s at %s:%d", ev.ExceptionDetails.Text, ev.ExceptionDetails.URL, ev.ExceptionDetails.LineNumber))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				b.errors = append(b.errors, fmt.Sprintf("console %s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}), "starting chromium")
	return b
}

// do runs steps with a bound on their time.
func (b *browser) do(t *testing.T, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluating %s", expr)
	return v
}

// screenshot saves the whole page as a PNG under dir and checks that it is one.
func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	require.NoError(t, err, "the screenshot is a PNG")
	assert.GreaterOrEqual(t, cfg.Width, 800)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, img, 0o644))
	t.Logf("screenshot: %s (%dx%d)", path, cfg.Width, cfg.Height)
}

// domServer is a row of the page's servers table as the browser shows it.
type domServer struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Badge string `json:"badge"`
	Tools int    `json:"tools"`
}

const domServersJS = `Array.from(document.querySelectorAll('#servers tbody tr')).map(r => ({
	id: r.dataset.server,
	state: r.dataset.state,
	badge: r.querySelector('td.health .badge').textContent.trim(),
	tools: Number(r.querySelector('td.tools').textContent),
}))`

// TestStatusPageInBrowser loads /status in headless chromium: the page shows every
// server with its health as /status.json reports it, follows a required server's
// crash and recovery by itself without being reloaded, and raises no script or
// security error. Screenshots are kept as artifacts.
func TestStatusPageInBrowser(t *testing.T) {
	requireSlow(t)
	exe := chromiumPath(t)
	t.Parallel()
	artifacts := artifactDir(t)

	dir := t.TempDir()
	broken := filepath.Join(dir, "broken") // while it exists, vital cannot start
	script := `if [ -e "$1" ]; then echo broken >&2; exit 3; fi; exec "$2" demo-server misbehave crash-after 1`
	config := `version: 1
servers:
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
  counter:
    ` + demoServer("counter") + `
    transform: [{prefix: ctr_}]
  vital:
    required: true
    truely-stateless: true
    command: /bin/sh
    args: ['-c', ` + quoted(script) + `, sh, ` + quoted(broken) + `, ` + quoted(binary) + `]
    transform: [{prefix: vital_}]
`
	a := serveConfig(t, httpTransport, config)
	a.waitLoaded()
	c := a.connect()
	c.callToolResult("ctr_increment", map[string]any{})
	c.callToolResult("demo_echo", map[string]any{"text": "for the page"})

	b := newBrowser(t, exe)
	b.do(t, 60*time.Second, chromedp.Navigate(opsBase(a)+"/status"), chromedp.WaitVisible(`#servers`))
	assert.Equal(t, "mcp-aggregator status", eval[string](t, b, `document.title`))

	// What the browser shows is what /status.json says.
	st, _ := opsStatusJSON(t, a)
	var want []domServer
	for _, s := range st.Servers {
		want = append(want, domServer{ID: s.ID, State: s.State, Badge: s.State, Tools: s.Tools})
	}
	got := eval[[]domServer](t, b, domServersJS)
	assert.Equal(t, want, got)
	assert.ElementsMatch(t, []string{"demo", "counter", "vital"}, []string{got[0].ID, got[1].ID, got[2].ID})
	for _, s := range got {
		assert.Equal(t, "ok", s.State, s.ID)
		assert.Positive(t, s.Tools, s.ID)
	}
	assert.True(t, eval[bool](t, b, `document.querySelector('#instances tr[data-server="counter"][data-role="leased"]') !== null`),
		"the session's lease of counter is listed")
	assert.Equal(t, "true", eval[string](t, b, `document.querySelector('#readiness').dataset.ready`))
	b.screenshot(t, artifacts, "status-healthy.png")

	// The page follows a crash on its own: no navigation (the marker survives).
	eval[chromedp.Void](t, b, `window.notReloaded = true`)
	require.NoError(t, os.WriteFile(broken, nil, 0o644))
	require.NotEmpty(t, c.callTool("vital_ping_tool", map[string]any{}).Error, "the crashing call fails")
	relLogLine(t, a, relRecoverTimeout, `msg="lease spawn-failed"`, "server=vital")
	b.do(t, 30*time.Second, chromedp.Poll[chromedp.Void](
		`document.querySelector('#servers tr[data-server="vital"]').dataset.state === "down" && document.querySelector('#readiness').dataset.ready === "false"`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(25*time.Second)))
	assert.True(t, eval[bool](t, b, `window.notReloaded === true`), "refreshed in place, not reloaded")
	assert.Contains(t, eval[string](t, b, `document.querySelector('#servers tr[data-server="vital"] td.health').textContent`), "restarting")
	assert.Contains(t, eval[string](t, b, `document.querySelector('#not-ready').textContent`), `required server "vital" is down`)
	b.screenshot(t, artifacts, "status-vital-down.png")

	require.NoError(t, os.Remove(broken))
	relLogLine(t, a, relRecoverTimeout, `msg="lease restarted"`, "server=vital")
	b.do(t, 30*time.Second, chromedp.Poll[chromedp.Void](
		`document.querySelector('#servers tr[data-server="vital"]').dataset.state === "ok" && document.querySelector('#readiness').dataset.ready === "true"`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(25*time.Second)))
	b.screenshot(t, artifacts, "status-recovered.png")

	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Empty(t, b.errors, "the page raised no script, network or security error")
}
