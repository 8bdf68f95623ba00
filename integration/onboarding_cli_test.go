package integration

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOnboardingVersionFlag(t *testing.T) {
	t.Parallel()
	res := runCLIIn(t, t.TempDir(), nil, "--version")
	assert.Equal(t, 0, res.code, res.stderr)
	assert.Regexp(t, `^mcp-aggregator \S+\ncommit: \S+.*\ngo: go\S+ \S+/\S+\n$`, res.stdout)
}

// TestOnboardingConfigFromEnvironment: a client that keeps --config for itself (the
// Inspector, mcp-cli) passes the config in MCP_AGGREGATOR_CONFIG instead.
func TestOnboardingConfigFromEnvironment(t *testing.T) {
	t.Parallel()
	first := writeConfig(t, "version: 1\nservers:\n  one:\n    truely-stateless: true\n    "+demoServer("tools")+"\n    tools: {whitelist: [echo]}\n    transform: [{prefix: one_}]\n")
	second := writeFile(t, t.TempDir(), "mcp.json", `{"mcpServers": {"two": {"command": `+quoted(binary)+`, "args": ["demo-server", "counter"]}}}`)
	list := first + string(filepath.ListSeparator) + second
	a := startAggregator(t, stdioTransport, aggregatorOptions{env: []string{"MCP_AGGREGATOR_CONFIG=" + list}})
	c := a.connect()
	a.waitLoaded()
	names := toolNames(t, c.listTools())
	assert.Contains(t, names, "one_echo")
	assert.Contains(t, names, "get")
	assert.NotContains(t, names, "demo_echo", "the demo is not served")
	assert.False(t, a.log.containsLine("no config found"))
	assert.True(t, a.log.containsLine("level=INFO", `msg=config`, "from=MCP_AGGREGATOR_CONFIG"), a.log.String())

	res := runCLIIn(t, t.TempDir(), []string{"MCP_AGGREGATOR_CONFIG=" + list}, "check")
	assert.Equal(t, 0, res.code, res.stdout)
	assert.Contains(t, res.stdout, "ok: 2 server(s)")
}

// TestOnboardingDemoFallback: serving the demo because no config was found is a
// warning that names the working directory and the two ways to give a config.
func TestOnboardingDemoFallback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := startAggregator(t, stdioTransport, aggregatorOptions{dir: dir})
	a.connect()
	a.waitLoaded()
	assert.True(t, a.log.containsLine("level=WARN", "no config found in "+dir, "--config FILE", "MCP_AGGREGATOR_CONFIG=FILE"), a.log.String())

	// check and tools find the same (no) config and both say so.
	chk := runCLIIn(t, dir, nil, "check")
	assert.Equal(t, 0, chk.code, chk.stdout)
	assert.Contains(t, chk.stdout, "warning: no config found in "+dir)
	assert.Contains(t, chk.stdout, "ok: 2 server(s)")
	tools := runCLIIn(t, dir, nil, "tools", "--json")
	assert.Equal(t, 0, tools.code, tools.stderr)
	assert.Contains(t, tools.stderr, "no config found in "+dir)
	var out catalogOutput
	require.NoError(t, json.Unmarshal([]byte(tools.stdout), &out), tools.stdout)
	assert.True(t, anyToolNamed(out.Tools, "demo_echo"), "tools lists what check checked")
	assert.True(t, anyContains(out.Notes, "no config found in "+dir), "the JSON says so too: %q", out.Notes)
}

// TestOnboardingTwoDefaultFiles: with both default files present, the one ignored is
// named.
func TestOnboardingTwoDefaultFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "mcp-aggregator.yaml", "version: 1\nservers:\n  top:\n    "+demoServer("counter")+"\n")
	writeFile(t, dir, ".minds/mcp.yaml", "version: 1\nservers:\n  minds:\n    "+demoServer("counter")+"\n")
	a := startAggregator(t, stdioTransport, aggregatorOptions{dir: dir})
	a.connect()
	a.waitLoaded()
	assert.True(t, a.log.containsLine("level=WARN", "using ./mcp-aggregator.yaml and ignoring ./.minds/mcp.yaml"), a.log.String())
	chk := runCLIIn(t, dir, nil, "check")
	assert.Contains(t, chk.stdout, "ignoring ./.minds/mcp.yaml")
	assert.Contains(t, chk.stdout, "ok: 1 server(s)")
}

// TestOnboardingCheckWarnsBeforeStart: check warns of what would fail when serving.
func TestOnboardingCheckWarnsBeforeStart(t *testing.T) {
	t.Parallel()
	ghost := filepath.Join(t.TempDir(), "no-such-mcp-server")
	config := writeConfig(t, "version: 1\nservers:\n  ghost:\n    command: "+quoted(ghost)+"\n  lost:\n    command: no-such-mcp-server-on-path\n")
	res := runCLIIn(t, t.TempDir(), nil, "check", "--config", config)
	assert.Equal(t, 0, res.code, res.stdout)
	assert.Contains(t, res.stdout, "warning: "+config+`:3: server "ghost": command: "`+ghost+`" is not an executable file`)
	assert.Contains(t, res.stdout, "warning: "+config+`:5: server "lost": command: "no-such-mcp-server-on-path" is not found on PATH`)
	assert.Contains(t, res.stdout, "ok: 2 server(s), 2 warning(s)")

	empty := writeConfig(t, `{"mcpServers": {}}`)
	res = runCLIIn(t, t.TempDir(), nil, "check", "--config", empty)
	assert.Contains(t, res.stdout, "warning: "+empty+": defines no servers")

	unknown := writeConfig(t, `{"editor.fontSize": 14}`)
	res = runCLIIn(t, t.TempDir(), nil, "check", "--config", unknown)
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stdout, "error: "+unknown+":1: not a config mcp-aggregator can read")
	assert.NotContains(t, res.stdout, "ok:")
}

// TestOnboardingYAMLErrorLine: a YAML mistake is reported on its own line, not on the
// line of the block around it.
func TestOnboardingYAMLErrorLine(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, "version: 1\nservers:\n  a:\n    command: x\n   args: [y]\n")
	res := runCLIIn(t, t.TempDir(), nil, "check", "--config", config)
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stdout, "error: "+config+":5: invalid YAML")
}

// TestOnboardingExcludedToolsSummary: tools the filters leave out are one info line per
// server and plan, not a warning per tool on every reload, and not problems in
// mcp_status.
func TestOnboardingExcludedToolsSummary(t *testing.T) {
	t.Parallel()
	config := func(extra string) string {
		return `version: 1
servers:
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    tools: {whitelist: [echo, add]}
    transform: [{prefix: demo_}]
` + extra
	}
	r := newReloadRig(t, stdioTransport, config(""))
	summary := regexp.MustCompile(`level=INFO msg="5 of 7 tools excluded by tools.whitelist: big, env, fail, pid, slow" server=demo`)
	count := func() int { return len(summary.FindAllString(r.a.log.String(), -1)) }
	assert.Equal(t, 1, count(), r.a.log.String())
	assert.False(t, r.a.log.containsLine("level=WARN", "whitelist"), "no warning per excluded tool")

	status := firstText(t, r.c.callToolResult("mcp_status", map[string]any{}))
	var st struct {
		Problems []string `json:"problems"`
	}
	require.NoError(t, json.Unmarshal([]byte(status), &st), status)
	assert.Empty(t, st.Problems, "an exclusion the config asked for is not a problem")

	// Another server arrives: the unchanged one is not re-planned, so not re-reported.
	r.save(config("  counter:\n    " + demoServer("counter") + "\n    transform: [{prefix: counter_}]\n"))
	r.waitReload()
	assert.Equal(t, 1, count(), "one line per server and plan, not per reload")

	res := runCLIIn(t, t.TempDir(), nil, "tools", "--json", "--config", r.path)
	var out struct {
		Problems []string `json:"problems"`
		Notes    []string `json:"notes"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), res.stdout)
	assert.Empty(t, out.Problems)
	assert.Equal(t, []string{`server "demo": 5 of 7 tools excluded by tools.whitelist: big, env, fail, pid, slow`}, out.Notes)
}

// TestOnboardingNoListChangedForFirstLoad: a client that connects while the upstreams
// start and lists its tools gets the whole catalog, and no tools/list_changed for it
// (Gemini CLI re-registers every tool on one).
func TestOnboardingNoListChangedForFirstLoad(t *testing.T) {
	t.Parallel()
	// The client initializes and lists at once, while the upstreams start.
	config := writeConfig(t, demoCounterConfig())
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{config}})
	c := a.connect()
	names := toolNames(t, c.listTools())
	assert.Contains(t, names, "demo_echo", "tools/list waits for the first load")
	assert.Contains(t, names, "counter_get")
	a.waitLoaded()
	// A ping answered after the load went out after any notification of it.
	resp := c.mustRequest("ping", map[string]any{})
	require.Empty(t, resp.Error)
	notes, _ := c.inbox.snapshot()
	for _, n := range notes {
		assert.NotEqual(t, "notifications/tools/list_changed", n.Method, "no list_changed for the first load")
	}
}

func anyToolNamed(tools []catalogEntry, name string) bool {
	for _, tool := range tools {
		if tool.Name == name {
			return true
		}
	}
	return false
}

// TestOnboardingNoReminderWithoutAdminTools: with admin.enabled: false there is no
// mcp_release, so the first leased result does not tell the agent to call it.
func TestOnboardingNoReminderWithoutAdminTools(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nadmin: {enabled: false}\nservers:\n  counter:\n    "+demoServer("counter")+"\n    transform: [{prefix: counter_}]\n")
	c := a.connect()
	a.waitLoaded()
	names := toolNames(t, c.listTools())
	assert.NotContains(t, names, "mcp_release")
	var res struct {
		Content []json.RawMessage `json:"content"`
	}
	result := c.callToolResult("counter_increment", map[string]any{})
	require.NoError(t, json.Unmarshal(result, &res))
	assert.Len(t, res.Content, 1, "no reminder to call a tool that is not there: %s", result)
	assert.NotContains(t, string(result), "mcp_release")
}
