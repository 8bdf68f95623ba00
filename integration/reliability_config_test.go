package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relStrictConfig has a strict server whose upstream offers tools missing from
// tools.config, a strict server whose every admitted tool is configured, and a
// dynamic one.
func relStrictConfig() string {
	return `version: 1
servers:
  strictbad:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: sb_}]
    tools:
      mode: strict
      config:
        echo: {timeout: 5s}
  strictgood:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: sg_}]
    tools:
      mode: strict
      whitelist: [echo]
      config:
        echo: {timeout: 5s}
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
}

// relAssertStrictProblem asserts that problems explain the strict-mode violation of
// server "strictbad" for tool: the server, the tool, the mode and both fixes.
func relAssertStrictProblem(t *testing.T, problems []string, tool string) {
	t.Helper()
	assert.True(t, anyContains(problems, "error:", `server "strictbad"`, `tool "`+tool+`"`, "not configured",
		"mode: strict", "missing tool: "+tool, "configured tools: [echo]",
		"add tools.config."+tool, "set tools.mode to dynamic"),
		"no problem explains that strict server strictbad offers the unconfigured tool %q: %q", tool, problems)
}

// TestReliabilityStrictMode serves a strict server that offers unconfigured tools: it
// is rejected with an actionable problem, while the other servers work.
func TestReliabilityStrictMode(t *testing.T) {
	t.Parallel()
	config := relStrictConfig()

	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, stdioTransport, config)
		a.waitLoaded()
		c := a.connect()

		names := toolNames(t, c.listTools())
		for _, n := range names {
			assert.False(t, strings.HasPrefix(n, "sb_"), "tool %q of the rejected strict server is exported", n)
		}
		assert.Contains(t, names, "sg_echo", "a strict server with every tool configured is served")
		assert.NotContains(t, names, "sg_add", "the whitelist still applies")
		assert.Equal(t, "strict ok", firstText(t, c.callToolResult("sg_echo", map[string]any{"text": "strict ok"})))
		assert.Equal(t, "dynamic ok", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "dynamic ok"})))

		problems := relStatus(t, c).Problems
		for _, tool := range []string{"add", "pid", "slow"} {
			relAssertStrictProblem(t, problems, tool)
		}
		assert.False(t, anyContains(problems, `tool "echo"`, "not configured"), "echo is configured: %q", problems)
		assert.True(t, a.log.containsLine("level=ERROR", "strictbad", "not configured"), "the log names the rejected server")
	})

	t.Run("tools --json", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "tools", "--json", "--config", writeConfig(t, config))
		assert.NotZero(t, res.code, "a strict-mode violation is an error; stderr: %s", res.stderr)
		var out catalogOutput
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), "stdout: %s", res.stdout)
		var servers []string
		for _, e := range out.Tools {
			servers = append(servers, e.Server)
		}
		assert.NotContains(t, servers, "strictbad")
		assert.Contains(t, servers, "strictgood")
		assert.Contains(t, servers, "demo")
		relAssertStrictProblem(t, out.Problems, "add")
	})
}

// TestReliabilityRequiredServer checks required: a required server that cannot start
// makes serve exit non-zero, naming it; the same server without required is a problem
// for that server only.
func TestReliabilityRequiredServer(t *testing.T) {
	t.Parallel()
	ghost := filepath.Join(t.TempDir(), "no-such-mcp-server")
	config := func(required bool) string {
		req := "false"
		if required {
			req = "true"
		}
		return `version: 1
servers:
  ghost:
    truely-stateless: true
    command: ` + quoted(ghost) + `
    required: ` + req + `
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
	}

	for _, tr := range []transport{stdioTransport, httpTransport} {
		t.Run("required/"+string(tr), func(t *testing.T) {
			t.Parallel()
			args := []string{"serve", "--config", writeConfig(t, config(true))}
			if tr == httpTransport {
				args = append(args, "--http", "127.0.0.1:0")
			}
			marker := newMarker()
			cmd := exec.Command(binary, args...)
			cmd.Dir = t.TempDir()
			cmd.Env = markerEnv(marker)
			// Hold stdin open: in stdio mode its end would be a reason to exit too.
			stdinR, stdinW, err := os.Pipe()
			require.NoError(t, err)
			defer stdinW.Close()
			cmd.Stdin = stdinR
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.WaitDelay = 5 * time.Second
			require.NoError(t, cmd.Start())
			stdinR.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err = <-exited:
			case <-time.After(startTimeout):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("serve kept running %s although a required server cannot start; stderr:\n%s", startTimeout, &stderr)
			}
			var exitErr *exec.ExitError
			require.ErrorAs(t, err, &exitErr, "serve exits non-zero; stderr:\n%s", &stderr)
			assert.NotZero(t, exitErr.ExitCode())
			log := strings.Split(stderr.String(), "\n")
			assert.True(t, anyContains(log, "level=ERROR", "required server", "server=ghost"),
				"the log names the required server that could not start:\n%s", &stderr)
			assert.True(t, anyContains(log, "level=ERROR", `server \"ghost\"`, ghost),
				"the log says why it could not start:\n%s", &stderr)
			assertNoSurvivors(t, marker)
		})
	}

	t.Run("not required", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, stdioTransport, config(false))
		a.waitLoaded()
		c := a.connect()
		assert.Equal(t, "served", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "served"})))
		assert.True(t, anyContains(relStatus(t, c).Problems, "error:", `server "ghost"`, ghost))
		select {
		case <-a.exited:
			t.Fatalf("serve exited although the failing server is not required; stderr:\n%s", a.log)
		default:
		}
	})
}

// relBadOutputConfig serves one server per kind of broken upstream output, and a good one.
func relBadOutputConfig() string {
	server := func(id string, mode string, extra string) string {
		return `  ` + id + `:
    truely-stateless: true
    ` + demoServer("misbehave", mode) + `
    transform: [{prefix: ` + id + `_}]
` + extra
	}
	return `version: 1
servers:
` + server("noise", "noise", "") +
		server("unknownid", "unknown-id", "") +
		server("huge", "huge-line", "") +
		server("hang", "hang-init", "    connect_timeout: 1s\n") +
		server("exitinit", "exit-init", "") + `  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
}

// TestReliabilityBadUpstreamOutput serves upstreams that write garbage, answer ids
// nobody sent, send an 8 MiB line, hang in initialize or exit in it. Each one either
// works despite it or becomes a clear problem of that server; none stops the
// aggregator or the other servers.
func TestReliabilityBadUpstreamOutput(t *testing.T) {
	t.Parallel()
	const hugeBytes = 8 << 20
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, relBadOutputConfig())
		a.waitLoaded()
		c := a.connect()
		names := toolNames(t, c.listTools())

		t.Run("noise", func(t *testing.T) {
			assert.Equal(t, "pong", firstText(t, c.callToolResult("noise_ping_tool", map[string]any{})))
			relLogLine(t, a, startTimeout, "level=WARN", "not JSON-RPC", "server=noise")
		})
		t.Run("unknown-id", func(t *testing.T) {
			assert.Equal(t, "pong", firstText(t, c.callToolResult("unknownid_ping_tool", map[string]any{})))
			relLogLine(t, a, startTimeout, "level=WARN", "never sent", "server=unknownid")
		})
		t.Run("huge-line", func(t *testing.T) {
			text := firstText(t, c.callToolResult("huge_ping_tool", map[string]any{}))
			assert.Equal(t, hugeBytes, len(text))
			assert.True(t, text == textPattern(hugeBytes), "the 8 MiB text arrived altered")
		})
		problems := relStatus(t, c).Problems
		t.Run("hang-init", func(t *testing.T) {
			assert.False(t, slices.Contains(names, "hang_ping_tool"))
			assert.True(t, anyContains(problems, "error:", `server "hang"`, "connect_timeout"), "mcp_status problems: %q", problems)
		})
		t.Run("exit-init", func(t *testing.T) {
			assert.False(t, slices.Contains(names, "exitinit_ping_tool"))
			assert.True(t, anyContains(problems, "error:", `server "exitinit"`, "exit"), "mcp_status problems: %q", problems)
			relLogLine(t, a, startTimeout, `msg="upstream stderr"`, "server=exitinit", "exiting during initialize")
		})

		// The aggregator and the good server carry on, and so do the servers that
		// misbehave but work.
		assert.Equal(t, "after all that", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "after all that"})))
		assert.Equal(t, "pong", firstText(t, c.callToolResult("noise_ping_tool", map[string]any{})))
		for _, id := range []string{"noise", "unknownid", "huge", "demo"} {
			health, ok := relStatus(t, c).relHealth(id)
			assert.True(t, ok && health == "ok", "server %q: health %q", id, health)
		}
		select {
		case <-a.exited:
			t.Fatalf("the aggregator exited; stderr:\n%s", a.log)
		default:
		}
	})
}
