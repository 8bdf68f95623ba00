package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// containerRig runs buildah and podman against storage of its own under a temporary
// directory, so that a test leaves no image, container, cgroup or network behind and
// shares nothing with other users of the machine.
type containerRig struct {
	t      *testing.T
	dir    string
	env    []string
	global []string // storage flags both tools take
	podman []string // podman's flags before the subcommand
	cgroup string   // cgroup parent of the containers, removed at the end
}

// newContainerRig skips t unless buildah, podman, runc and slirp4netns are there and
// the test runs as root (rootless podman needs subordinate ids set up for the user).
func newContainerRig(t *testing.T) *containerRig {
	t.Helper()
	for _, tool := range []string{"buildah", "podman", "runc", "slirp4netns"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("container image test: %s is not installed (apt-get install buildah podman runc slirp4netns; .ci/run does)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("container image test: needs root (rootless podman needs subordinate uid ranges for the user)")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	// No default ulimits: a sandbox may forbid raising them, and the image needs none.
	// The network backend's lock files go to the temporary directory too (podman still
	// makes an empty /run/containers/networks).
	require.NoError(t, os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n[network]\nnetwork_config_dir = "+
		quoted(filepath.Join(dir, "networks"))+"\n"), 0o644))
	for _, sub := range []string{"tmp", "libpod"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, sub), 0o700))
	}
	global := []string{"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}
	r := &containerRig{
		t:      t,
		dir:    dir,
		env:    append(os.Environ(), "CONTAINERS_CONF="+conf, "TMPDIR="+filepath.Join(dir, "tmp")),
		global: global,
		podman: append(slices.Clone(global), "--runtime", "runc", "--cgroup-manager", "cgroupfs",
			"--events-backend", "file", "--tmpdir", filepath.Join(dir, "libpod")),
		cgroup: "/mcp-aggregator-test-" + randomHex(t, 6),
	}
	t.Cleanup(r.removeCgroups)
	return r
}

// run runs a tool with args and returns its stdout, its stderr and its error.
func (r *containerRig) run(timeout time.Duration, tool string, args ...string) (string, string, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	flags := r.global
	if tool == "podman" {
		flags = r.podman
	}
	cmd := exec.CommandContext(ctx, tool, append(slices.Clone(flags), args...)...)
	cmd.Env = r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// must runs a tool and fails the test unless it succeeds.
func (r *containerRig) must(timeout time.Duration, tool string, args ...string) string {
	r.t.Helper()
	stdout, stderr, err := r.run(timeout, tool, args...)
	require.NoError(r.t, err, "%s %s\nstdout: %s\nstderr: %s", tool, strings.Join(args, " "), stdout, stderr)
	return stdout
}

// container starts a detached container and removes it at the end of the test.
func (r *containerRig) container(name string, args ...string) {
	r.t.Helper()
	run := append([]string{"run", "-d", "--name", name, "--cgroup-parent", r.cgroup, "--network", "slirp4netns"}, args...)
	r.must(2*time.Minute, "podman", run...)
	r.t.Cleanup(func() { r.run(time.Minute, "podman", "rm", "-f", "-t", "0", name) })
}

// removeCgroups removes the (empty) cgroups podman made under r.cgroup, deepest first,
// on cgroup v1 and v2 alike.
func (r *containerRig) removeCgroups() {
	parents, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", r.cgroup))
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", r.cgroup)); err == nil {
		parents = append(parents, filepath.Join("/sys/fs/cgroup", r.cgroup))
	}
	for _, parent := range parents {
		var dirs []string
		_ = filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				r.t.Logf("cgroup %s stays: %v", dirs[i], err)
			}
		}
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestContainerImage builds deploy/container/Containerfile from the release directory
// and runs the image as an operator would: it prints its version, serves tools/list to
// a client with the bearer token from its mounted config (an upstream that is the
// binary's own demo server), runs as the non-root user, refuses to start on 0.0.0.0
// without http.auth, and exits 0 on SIGTERM after draining.
func TestContainerImage(t *testing.T) {
	requireSlow(t)
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("container image test: the image is linux/amd64 or linux/arm64, this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	r := newContainerRig(t)
	const version = "9.9.9-image.test"

	// The build context is what the release step writes, for this machine's arch only.
	dist := filepath.Join(r.dir, "dist")
	commit := runRelease(t, dist, version, "TARGETS=linux/"+runtime.GOARCH)
	_, err := os.Stat(filepath.Join(dist, "ca-certificates.crt"))
	require.NoError(t, err, "scripts/release.sh copies the host's CA bundle into the build context")

	image := "localhost/mcp-aggregator-test:" + randomHex(t, 4)
	started := time.Now()
	r.must(10*time.Minute, "buildah", "build", "--isolation", "chroot", "--pull=never",
		"-f", filepath.Join(releaseRepo(t), "deploy", "container", "Containerfile"), "-t", image, dist)
	t.Logf("image built in %s", time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() { r.run(time.Minute, "podman", "rmi", "-f", image) })

	var config struct {
		User         string
		ExposedPorts map[string]struct{}
		Entrypoint   []string
		Cmd          []string
	}
	inspect := r.must(time.Minute, "podman", "image", "inspect", "--format", "{{json .Config}}", image)
	require.NoError(t, json.Unmarshal([]byte(inspect), &config), inspect)
	assert.Equal(t, "65532:65532", config.User)
	assert.Contains(t, config.ExposedPorts, "8080/tcp")
	assert.Equal(t, []string{"/mcp-aggregator"}, config.Entrypoint)
	assert.Equal(t, []string{"serve", "--http", "0.0.0.0:8080", "--config", "/etc/mcp-aggregator/config.yaml"}, config.Cmd)

	t.Run("version", func(t *testing.T) {
		out := r.must(2*time.Minute, "podman", "run", "--rm", "--cgroup-parent", r.cgroup, "--network", "none", image, "--version")
		assert.Regexp(t, `^mcp-aggregator `+regexp.QuoteMeta(version)+`\ncommit: `+commit+`\ngo: go\S+ linux/`+runtime.GOARCH+`\n$`, out)
	})

	t.Run("serves tools/list with a bearer token and drains on SIGTERM", func(t *testing.T) {
		token := randomHex(t, 24)
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		// In a scratch image the only program is the aggregator, so the upstream is its
		// own demo server.
		require.NoError(t, os.WriteFile(cfg, []byte(`version: 1
http:
  auth:
    tokens:
      tester: { env: GATEWAY_TOKEN }
servers:
  demo:
    command: /mcp-aggregator
    args: [demo-server, tools]
    transform: [{ prefix: demo_ }]
`), 0o644))
		name := "mcp-aggregator-test-" + randomHex(t, 4)
		r.container(name, "-p", "127.0.0.1::8080", "-e", "GATEWAY_TOKEN="+token,
			"-v", cfg+":/etc/mcp-aggregator/config.yaml:ro", image)
		port := strings.TrimSpace(r.must(time.Minute, "podman", "port", name, "8080/tcp"))
		require.Regexp(t, `^127\.0\.0\.1:\d+$`, port)
		base := "http://" + port
		logs := func() string {
			stdout, stderr, _ := r.run(time.Minute, "podman", "logs", name)
			return stdout + stderr
		}

		// Ready once the config is loaded and the upstream started.
		ready := func() bool {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		if !assert.Eventually(t, ready, time.Minute, 100*time.Millisecond, "GET /readyz answers 200") {
			t.Fatalf("the container never got ready; its log:\n%s", logs())
		}

		init, err := json.Marshal(initializeMsg())
		require.NoError(t, err)
		denied := corePost(t, base+"/mcp", "", init, nil)
		assert.Equal(t, http.StatusUnauthorized, denied.status, "no token: %s", denied.body)

		auth := map[string]string{"Authorization": "Bearer " + token}
		opened := corePost(t, base+"/mcp", "", init, auth)
		require.Equal(t, http.StatusOK, opened.status, "%s\n%s", opened.body, logs())
		session := opened.header.Get("Mcp-Session-Id")
		require.NotEmpty(t, session)
		corePost(t, base+"/mcp", session, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), auth)
		listed := coreMessage(t, corePost(t, base+"/mcp", session, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), auth))
		require.Empty(t, listed.Error)
		var tools struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(listed.Result, &tools))
		var demo []string
		for _, tool := range tools.Tools {
			if strings.HasPrefix(tool.Name, "demo_") {
				demo = append(demo, tool.Name)
			}
		}
		assert.NotEmpty(t, demo, "the demo upstream's tools, prefixed: %v", tools.Tools)

		// The aggregator and the upstream it spawned run as the image's user.
		top := r.must(time.Minute, "podman", "top", name, "user", "args")
		lines := strings.Split(strings.TrimSpace(top), "\n")
		require.Greater(t, len(lines), 2, "the aggregator, its reaper and the upstream: %s", top)
		for _, line := range lines[1:] {
			assert.True(t, strings.HasPrefix(line, "65532 "), "a process of the container runs as 65532: %q", line)
		}
		assert.Contains(t, top, "demo-server tools")

		r.must(time.Minute, "podman", "kill", "--signal", "TERM", name)
		code := strings.TrimSpace(r.must(time.Minute, "podman", "wait", name))
		assert.Equal(t, "0", code, "exit status after SIGTERM\n%s", logs())
		out := logs()
		assert.Contains(t, out, "draining")
		assert.Contains(t, out, "every upstream is closed")
	})

	t.Run("refuses 0.0.0.0 without http.auth", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte("version: 1\nservers:\n  demo:\n    command: /mcp-aggregator\n    args: [demo-server, tools]\n"), 0o644))
		stdout, stderr, err := r.run(2*time.Minute, "podman", "run", "--rm", "--cgroup-parent", r.cgroup, "--network", "none",
			"-v", cfg+":/etc/mcp-aggregator/config.yaml:ro", image)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "stdout: %s\nstderr: %s", stdout, stderr)
		assert.Equal(t, 1, exit.ExitCode(), "stderr: %s", stderr)
		assert.Contains(t, stdout+stderr, "http.auth")
	})
}
