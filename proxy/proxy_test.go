package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// demoServers are the upstreams of the end-to-end test, as YAML.
type demoServers struct {
	toolsSpec      string // what the "tools" server runs
	toolsArgs      string
	toolsWhitelist string
	counterPrefix  string
}

func (d demoServers) yaml() []byte {
	exe := os.Args[0]
	whitelist := ""
	if d.toolsWhitelist != "" {
		whitelist = "\n    tools:\n      whitelist: " + d.toolsWhitelist
	}
	return []byte(fmt.Sprintf(`version: 1
servers:
  tools:
    truely-stateless: true
    command: '%[1]s'
    args: %[2]s
    env: { %[3]s: '%[4]s' }
    connect_timeout: 20s
    transform:
      - prefix: 'demo_'%[5]s
  counter:
    command: '%[1]s'
    env: { %[3]s: counter }
    connect_timeout: 20s
    transform:
      - prefix: '%[6]s'
  fidelity:
    truely-stateless: true
    command: '%[1]s'
    env: { %[3]s: fidelity }
    connect_timeout: 20s
    transform:
      - prefix: 'fid_'
`, exe, d.toolsArgs, demoEnv, d.toolsSpec, whitelist, d.counterPrefix))
}

func baseServers() demoServers {
	return demoServers{toolsSpec: "tools", toolsArgs: "[generation-1]", counterPrefix: "ctr_"}
}

// load parses a config as if it were dir/mcp.yaml.
func load(t testing.TB, dir string, d demoServers) *config.Workspace {
	t.Helper()
	ws, problems := config.LoadBytes(filepath.Join(dir, "mcp.yaml"), d.yaml(), nil)
	require.NotNil(t, ws, "problems: %v", problems)
	require.False(t, config.HasErrors(problems), "problems: %v", problems)
	return ws
}

func reconcile(t testing.TB, p *Proxy, ws *config.Workspace) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return p.Reconcile(ctx, ws, nil)
}

func newTestProxy(t testing.TB) *Proxy {
	return newTestProxyWith(t, Options{})
}

// newTestProxyWith is a proxy of opts, with a silent log, the version
// "test" and short upstream grace periods, closed when the test ends.
func newTestProxyWith(t testing.TB, opts Options) *Proxy {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Version = "test"
	opts.Upstream = upstream.Options{StdinGrace: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond}
	p := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func sharedPID(t *testing.T, p *Proxy, id string) int {
	t.Helper()
	for _, s := range p.Status(anonymousKey).Servers {
		if s.ID == id {
			return s.PID
		}
	}
	t.Fatalf("server %q is not running", id)
	return 0
}

// toolNames lists the names in a tools/list result.
func toolNames(t *testing.T, result json.RawMessage) []string {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(result, &res))
	names := make([]string, 0, len(res.Tools))
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured map[string]json.Number `json:"structuredContent"`
	IsError    bool                   `json:"isError"`
}

func decodeResult(t *testing.T, raw json.RawMessage) toolResult {
	t.Helper()
	var res toolResult
	decodeExact(t, raw, &res)
	return res
}

// decodeNumbers decodes JSON keeping every number as written.
func decodeNumbers(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	decodeExact(t, raw, &v)
	return v
}

// decodeExact decodes raw into v, keeping every number as written.
func decodeExact(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(v), "%s", raw)
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, raw))
	return b.String()
}

func TestProxyEndToEnd(t *testing.T) {
	dir := t.TempDir()
	p := newTestProxy(t)

	report := reconcile(t, p, load(t, dir, baseServers()))
	require.Empty(t, report.Failed, "problems: %v", report.Problems)
	require.True(t, report.Changed)
	assert.Equal(t, p.Version(), report.Version)
	versionAfterLoad := p.Version()

	c := connect(t, p)
	toolsPID := sharedPID(t, p, "tools")
	require.NotZero(t, toolsPID)

	t.Run("catalog", func(t *testing.T) {
		list := c.call("tools/list", map[string]any{})
		require.Empty(t, list.Error)
		assert.ElementsMatch(t, []string{
			"mcp_release", "mcp_status",
			"demo_echo", "demo_add", "demo_pid", "demo_big", "demo_slow", "demo_fail", "demo_env",
			"ctr_increment", "ctr_get", "ctr_pid",
			"fid_kitchen_sink", "fid_no_annotations", "fid_empty_schema", "fid_rich", "fid_broken", "fid_add_tool", "fid_progress_then_result",
		}, toolNames(t, list.Result))
		assert.True(t, bytes.Contains(list.Line, p.Catalog().ToolsJSON()), "the list is the catalog's bytes")

		// Every definition is the upstream's, byte for byte, with only the name changed.
		var fixture struct {
			Tools []json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(demo.FidelityFixture("tools.json"), &fixture))
		for _, raw := range fixture.Tools {
			var head struct {
				Name string `json:"name"`
			}
			require.NoError(t, json.Unmarshal(raw, &head))
			e, ok := p.Catalog().Lookup("fid_" + head.Name)
			require.True(t, ok, head.Name)
			want, err := catalog.Renamed(json.RawMessage(compactJSON(t, raw)), "fid_"+head.Name)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(e.Raw))
			assert.True(t, bytes.Contains(list.Line, want), "tools/list carries %s intact", head.Name)
		}
	})

	t.Run("calls", func(t *testing.T) {
		assert.JSONEq(t, `{"content":[{"type":"text","text":"hi"}]}`, string(c.callTool("demo_echo", map[string]any{"text": "hi"})))

		rich := c.call("tools/call", map[string]any{"name": "fid_rich"})
		assert.Equal(t, `{"jsonrpc":"2.0","id":`+string(rich.ID)+`,"result":`+compactJSON(t, demo.FidelityFixture("rich_result.json"))+`}`, string(rich.Line),
			"a rich result reaches the client byte for byte")

		broken := c.call("tools/call", map[string]any{"name": "fid_broken"})
		assert.Equal(t, decodeNumbers(t, demo.FidelityFixture("error.json")), decodeNumbers(t, broken.Error), "an upstream error reaches the client intact")
		assert.Equal(t, compactJSON(t, demo.FidelityFixture("error.json")), string(broken.Error), "an upstream error reaches the client byte for byte, like a result")

		unknown := c.call("tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
		require.NotEmpty(t, unknown.Error)
		assert.Contains(t, string(unknown.Error), "no_such_tool")
	})

	t.Run("progress arrives before the result, under the client's token", func(t *testing.T) {
		before := len(c.notifications("notifications/progress"))
		res := c.call("tools/call", map[string]any{"name": "demo_slow", "arguments": map[string]any{"seconds": 0.2, "steps": 2},
			"_meta": map[string]any{"progressToken": "client-token"}})
		require.Empty(t, res.Error, "%s", res.Line)
		got := c.notifications("notifications/progress")[before:]
		require.Len(t, got, 2, "both notifications were written before the result")
		for i, n := range got {
			var params struct {
				Token    string `json:"progressToken"`
				Progress int    `json:"progress"`
			}
			require.NoError(t, json.Unmarshal(n.Params, &params))
			assert.Equal(t, "client-token", params.Token)
			assert.Equal(t, i+1, params.Progress)
		}
	})

	var counterPID int
	t.Run("a stateful server leases an instance to the session", func(t *testing.T) {
		first := decodeResult(t, c.callTool("ctr_increment", map[string]any{}))
		require.Len(t, first.Content, 2, "the first call carries the lease reminder")
		assert.Equal(t, "1", first.Content[0].Text)
		assert.Contains(t, first.Content[1].Text, "mcp_release")
		assert.Contains(t, first.Content[1].Text, `"counter"`)

		second := decodeResult(t, c.callTool("ctr_increment", map[string]any{}))
		require.Len(t, second.Content, 1, "the reminder comes once")
		assert.Equal(t, "2", second.Content[0].Text)

		pid, err := decodeResult(t, c.callTool("ctr_pid", map[string]any{})).Structured["pid"].Int64()
		require.NoError(t, err)
		counterPID = int(pid)
	})

	t.Run("an identical workspace changes nothing", func(t *testing.T) {
		catalog := p.Catalog()
		report := reconcile(t, p, load(t, dir, baseServers()))
		assert.False(t, report.Changed)
		assert.Empty(t, report.Failed)
		assert.Equal(t, versionAfterLoad, report.Version)
		assert.Equal(t, toolsPID, sharedPID(t, p, "tools"))
		assert.Equal(t, string(catalog.ToolsJSON()), string(p.Catalog().ToolsJSON()))
		assert.Equal(t, "3", decodeResult(t, c.callTool("ctr_increment", map[string]any{})).Content[0].Text, "the lease survives")
	})

	t.Run("a whitelist change re-plans without a restart", func(t *testing.T) {
		notified := len(c.notifications("notifications/tools/list_changed"))
		d := baseServers()
		d.toolsWhitelist = "[echo, pid]"
		report := reconcile(t, p, load(t, dir, d))
		assert.True(t, report.Changed)
		assert.Empty(t, report.Failed)
		assert.Equal(t, versionAfterLoad+1, report.Version)
		assert.Equal(t, toolsPID, sharedPID(t, p, "tools"), "the process is kept")
		c.waitNotifications("notifications/tools/list_changed", notified+1)

		names := toolNames(t, c.call("tools/list", map[string]any{}).Result)
		assert.Contains(t, names, "demo_echo")
		assert.Contains(t, names, "demo_pid")
		assert.NotContains(t, names, "demo_add")
		removed := c.call("tools/call", map[string]any{"name": "demo_add", "arguments": map[string]any{"a": 1, "b": 2}})
		assert.NotEmpty(t, removed.Error, "a filtered tool is not callable")
	})

	t.Run("an args change restarts the server", func(t *testing.T) {
		d := baseServers()
		d.toolsWhitelist = "[echo, pid]"
		d.toolsArgs = "[generation-2]"
		version := p.Version()
		report := reconcile(t, p, load(t, dir, d))
		assert.Empty(t, report.Failed)
		assert.False(t, report.Changed, "the same tools: the catalog did not change")
		assert.Equal(t, version, report.Version)
		newPID := sharedPID(t, p, "tools")
		assert.NotEqual(t, toolsPID, newPID)
		testproc.RequireGone(t, toolsPID)
		pid, err := decodeResult(t, c.callTool("demo_pid", map[string]any{})).Structured["pid"].Int64()
		require.NoError(t, err)
		assert.Equal(t, newPID, int(pid), "calls reach the new process")
		toolsPID = newPID
	})

	t.Run("a failed start keeps the last good state while others commit", func(t *testing.T) {
		d := baseServers()
		d.toolsWhitelist = "[echo, pid]"
		d.toolsArgs = "[generation-3]"
		d.toolsSpec = "misbehave exit-init"
		d.counterPrefix = "cnt_"
		report := reconcile(t, p, load(t, dir, d))
		assert.Equal(t, []string{"tools"}, report.Failed)
		assert.True(t, report.Changed, "the counter's rename committed")
		var found bool
		for _, pr := range report.Problems {
			if pr.Server == "tools" && pr.Severity == config.SeverityError {
				found = true
				assert.Contains(t, pr.Message, "could not start")
			}
		}
		assert.True(t, found, "the failure is a problem: %v", report.Problems)

		assert.Equal(t, toolsPID, sharedPID(t, p, "tools"), "the last good instance keeps running")
		names := toolNames(t, c.call("tools/list", map[string]any{}).Result)
		assert.Contains(t, names, "demo_echo", "and keeps its tools")
		assert.Contains(t, names, "cnt_get")
		assert.NotContains(t, names, "ctr_get")
		assert.JSONEq(t, `{"content":[{"type":"text","text":"still"}]}`, string(c.callTool("demo_echo", map[string]any{"text": "still"})))
		assert.Equal(t, "3", decodeResult(t, c.callTool("cnt_get", map[string]any{})).Content[0].Text, "a rename keeps the lease")
	})

	t.Run("a nil workspace changes nothing", func(t *testing.T) {
		catalog, version := p.Catalog(), p.Version()
		problems := []config.Problem{{Severity: config.SeverityError, File: "mcp.yaml", Message: "invalid YAML"}}
		report := p.Reconcile(context.Background(), nil, problems)
		assert.False(t, report.Changed)
		assert.Empty(t, report.Failed)
		assert.Equal(t, version, report.Version)
		assert.Same(t, catalog, p.Catalog())
		assert.Equal(t, toolsPID, sharedPID(t, p, "tools"))
		assert.Equal(t, problems, p.Problems())
	})

	t.Run("mcp_status", func(t *testing.T) {
		res := decodeResult(t, c.callTool("mcp_status", map[string]any{}))
		require.Len(t, res.Content, 1)
		var st Status
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &st), res.Content[0].Text)
		assert.Equal(t, p.Version(), st.Version)
		byID := map[string]ServerStatus{}
		for _, s := range st.Servers {
			byID[s.ID] = s
		}
		require.Len(t, byID, 3)
		assert.Equal(t, "shared", byID["tools"].Mode)
		assert.Equal(t, toolsPID, byID["tools"].PID)
		assert.Equal(t, "ok", byID["tools"].Health)
		assert.Equal(t, 2, byID["tools"].Tools)
		assert.Equal(t, "stdio", byID["tools"].Transport)
		assert.Equal(t, "leased", byID["counter"].Mode)
		assert.Equal(t, 1, byID["counter"].Leased)
		assert.Equal(t, 3, byID["counter"].Tools)
		assert.Equal(t, []LeaseStatus{{Server: "counter", PID: counterPID}}, st.Leases, "this session's leases")
		assert.Equal(t, []string{"error: mcp.yaml: invalid YAML"}, st.Problems)
	})

	t.Run("mcp_release", func(t *testing.T) {
		tests := []struct {
			server  string
			isError bool
			text    string
		}{
			{"tools", false, "shared"},
			{"nope", true, "no server"},
			{"", true, "serverId"},
		}
		for _, tc := range tests {
			res := decodeResult(t, c.callTool("mcp_release", map[string]any{"serverId": tc.server}))
			assert.Equal(t, tc.isError, res.IsError, tc.server)
			assert.Contains(t, res.Content[0].Text, tc.text)
		}

		res := decodeResult(t, c.callTool("mcp_release", map[string]any{"serverId": "counter"}))
		assert.False(t, res.IsError)
		assert.Contains(t, res.Content[0].Text, "released")
		testproc.RequireGone(t, counterPID)
		res = decodeResult(t, c.callTool("mcp_release", map[string]any{"serverId": "counter"}))
		assert.Contains(t, res.Content[0].Text, "nothing to release")

		fresh := decodeResult(t, c.callTool("cnt_get", map[string]any{}))
		assert.Equal(t, "0", fresh.Content[0].Text, "a fresh instance after release")
		require.Len(t, fresh.Content, 2, "with the reminder again")
	})

	t.Run("closing the session ends its leases", func(t *testing.T) {
		pid, err := decodeResult(t, c.callTool("cnt_pid", map[string]any{})).Structured["pid"].Int64()
		require.NoError(t, err)
		c.disconnect()
		testproc.RequireGone(t, int(pid))
	})

	t.Run("Close stops every upstream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		p.Close(ctx)
		testproc.RequireGone(t, toolsPID)
		for _, id := range []string{"tools", "counter", "fidelity"} {
			assert.Nil(t, p.current().servers[id])
		}
	})
}

func TestNewServerThatFailsToStartIsReported(t *testing.T) {
	p := newTestProxy(t)
	yaml := fmt.Sprintf(`version: 1
servers:
  good:
    truely-stateless: true
    command: '%[1]s'
    env: { %[2]s: tools }
  hangs:
    command: '%[1]s'
    env: { %[2]s: misbehave hang-init }
    connect_timeout: 300ms
  missing:
    command: /nonexistent/server
`, os.Args[0], demoEnv)
	ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), []byte(yaml), nil)
	require.NotNil(t, ws, "%v", problems)
	began := time.Now()
	report := reconcile(t, p, ws)
	assert.Less(t, time.Since(began), 10*time.Second, "servers start in parallel; a hanging one costs its connect_timeout")
	assert.ElementsMatch(t, []string{"hangs", "missing"}, report.Failed)
	assert.True(t, report.Changed)
	var texts []string
	for _, pr := range p.Problems() {
		texts = append(texts, pr.String())
	}
	joined := strings.Join(texts, "\n")
	assert.Contains(t, joined, `server "hangs"`)
	assert.Contains(t, joined, "connect_timeout")
	assert.Contains(t, joined, `server "missing"`)

	_, ok := p.Catalog().Lookup("echo")
	assert.True(t, ok, "the good server committed")
	for _, e := range p.Catalog().Entries() {
		assert.Contains(t, []string{"good", adminServer}, e.Server)
	}
}

// A reload that comes after Close starts nothing: no one would stop it.
func TestReconcileAfterCloseStartsNothing(t *testing.T) {
	p := newTestProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p.Close(ctx)
	report := reconcile(t, p, load(t, t.TempDir(), baseServers()))
	assert.Empty(t, report.Failed)
	assert.Empty(t, p.Status(anonymousKey).Servers, "a server was started after Close")
	assert.Equal(t, 2, p.Catalog().Len(), "only the admin tools")
}

// A server's problems carry its line, and say its name once.
func TestServerProblemsNameTheServerOnce(t *testing.T) {
	s := &config.Server{ID: "c", File: "c.yaml", Line: 7}
	pr := startProblem(s, fmt.Errorf(`server "c": start /bin/nope: no such file`))
	assert.Equal(t, 7, pr.Line)
	assert.Equal(t, "could not start: start /bin/nope: no such file", pr.Message)
	assert.Equal(t, 1, strings.Count(pr.String(), `server "c"`), "%s", pr.String())
	named := namingProblems(s, naming.Plan{Problems: []naming.Problem{{Tool: "env", Message: "bad"}}})
	require.Len(t, named, 1)
	assert.Equal(t, 7, named[0].Line)
}
