package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opsBase is the gateway's root URL: its /mcp URL without the path.
func opsBase(a *aggregator) string { return strings.TrimSuffix(a.url, "/mcp") }

// opsGet fetches an operations endpoint.
func opsGet(t testing.TB, client *http.Client, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, body
}

// opsScrape fetches /metrics and parses the text exposition.
func opsScrape(t testing.TB, a *aggregator) map[string]*dto.MetricFamily {
	t.Helper()
	return opsScrapeAs(t, a, "")
}

// opsScrapeAs is opsScrape with a bearer token ("": none).
func opsScrapeAs(t testing.TB, a *aggregator, token string) map[string]*dto.MetricFamily {
	t.Helper()
	client := http.DefaultClient
	if token != "" {
		client = &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	}
	code, header, body := opsGet(t, client, opsBase(a)+"/metrics")
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Contains(t, header.Get("Content-Type"), "text/plain")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)
	return fams
}

// opsSeries returns the value of the series of family name with exactly labels;
// ok is false when there is none.
func opsSeries(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, ok bool) {
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		same := true
		for k, want := range labels {
			if got[k] != want {
				same = false
			}
		}
		if !same {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func opsValue(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := opsSeries(fams, name, labels)
	require.True(t, ok, "no series %s%v among %v", name, labels, fams[name].GetMetric())
	return v
}

// opsStatus is the part of /status.json the tests read.
type opsStatus struct {
	Ready    bool     `json:"ready"`
	NotReady []string `json:"notReady"`
	Sessions int      `json:"sessions"`
	Servers  []struct {
		ID        string `json:"id"`
		Mode      string `json:"mode"`
		Health    string `json:"health"`
		State     string `json:"state"`
		Tools     int    `json:"tools"`
		Instances int    `json:"instances"`
		Leased    int    `json:"leased"`
		Waiting   int    `json:"waiting"`
		Required  bool   `json:"required"`
	} `json:"servers"`
	Instances []struct {
		Server   string `json:"serverId"`
		Role     string `json:"role"`
		PID      int    `json:"pid"`
		Session  string `json:"session"`
		Calls    int    `json:"calls"`
		InFlight int    `json:"inFlight"`
		Age      string `json:"age"`
	} `json:"instances"`
	Reloads []struct {
		Outcome string `json:"outcome"`
		Version int    `json:"registryVersion"`
	} `json:"reloads"`
	Problems []string `json:"problems"`
}

func opsStatusJSON(t testing.TB, a *aggregator) (opsStatus, []byte) {
	t.Helper()
	code, header, body := opsGet(t, http.DefaultClient, opsBase(a)+"/status.json")
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "application/json", header.Get("Content-Type"))
	var st opsStatus
	require.NoError(t, json.Unmarshal(body, &st), "%s", body)
	return st, body
}

// opsConfig serves the shared demo tools as "demo" and the stateful counter as
// "counter", one with a secret in its environment.
func opsConfig() string {
	return `version: 1
servers:
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: { API_TOKEN: "tok-0123456789-do-not-show" }
    transform: [{prefix: demo_}]
  counter:
    ` + demoServer("counter") + `
    transform: [{prefix: ctr_}]
`
}

// TestOpsMetricsAfterCalls makes real calls through the gateway and reads them back
// from /metrics and /status.json.
func TestOpsMetricsAfterCalls(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, opsConfig())
	a.waitLoaded()

	code, _, body := opsGet(t, http.DefaultClient, opsBase(a)+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", string(body))

	c := a.connect()
	for range 3 {
		c.callToolResult("demo_echo", map[string]any{"text": "hello"})
	}
	c.callToolResult("demo_fail", map[string]any{"message": "on purpose"})
	c.callToolResult("ctr_increment", map[string]any{})
	c.callToolResult("ctr_increment", map[string]any{})
	unknown := c.callTool("no_such_tool", map[string]any{})
	require.NotEmpty(t, unknown.Error)

	fams := opsScrape(t, a)
	calls := "mcp_aggregator_tool_calls_total"
	assert.Equal(t, 3.0, opsValue(t, fams, calls, map[string]string{"server": "demo", "tool": "demo_echo", "outcome": "ok"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "demo", "tool": "demo_fail", "outcome": "tool_error"}))
	assert.Equal(t, 2.0, opsValue(t, fams, calls, map[string]string{"server": "counter", "tool": "ctr_increment", "outcome": "ok"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "_unknown", "tool": "_unknown", "outcome": "error"}))
	_, ok := opsSeries(fams, calls, map[string]string{"server": "_unknown", "tool": "no_such_tool", "outcome": "error"})
	assert.False(t, ok, "a name outside the catalog never becomes a label")

	durations := "mcp_aggregator_tool_call_duration_seconds"
	assert.Equal(t, 4.0, opsValue(t, fams, durations, map[string]string{"server": "demo"}), "observations of demo's calls")
	assert.Equal(t, 2.0, opsValue(t, fams, durations, map[string]string{"server": "counter"}))

	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_sessions", nil))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_leases", map[string]string{"server": "counter"}))
	assert.Equal(t, 0.0, opsValue(t, fams, "mcp_aggregator_leases", map[string]string{"server": "demo"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_upstream_instances", map[string]string{"server": "demo", "state": "shared"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_upstream_instances", map[string]string{"server": "counter", "state": "leased"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_reloads_total", map[string]string{"outcome": "ok"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_ready", nil))
	assert.Contains(t, fams, "mcp_aggregator_upstream_restarts_total")
	assert.Contains(t, fams, "go_goroutines", "the Go collector")
	assert.Contains(t, fams, "process_resident_memory_bytes", "the process collector")

	st, raw := opsStatusJSON(t, a)
	assert.NotContains(t, string(raw), "tok-0123456789-do-not-show", "no secret on the status")
	assert.True(t, st.Ready)
	assert.Equal(t, 1, st.Sessions)
	servers := map[string]string{}
	for _, s := range st.Servers {
		servers[s.ID] = s.Mode + "/" + s.State
	}
	assert.Equal(t, map[string]string{"demo": "shared/ok", "counter": "leased/ok"}, servers)
	var leased, shared int
	for _, in := range st.Instances {
		switch {
		case in.Server == "counter" && in.Role == "leased":
			leased++
			assert.Equal(t, 2, in.Calls)
			assert.Len(t, in.Session, 12, "the session is named by a digest")
			assert.NotContains(t, coreSessionOf(t, c), in.Session, "never by its id")
			assert.NotEmpty(t, in.Age)
		case in.Server == "demo" && in.Role == "shared":
			shared++
			assert.Equal(t, 4, in.Calls)
		}
	}
	assert.Equal(t, 1, leased)
	assert.Equal(t, 1, shared)
	require.NotEmpty(t, st.Reloads)
	assert.Equal(t, "ok", st.Reloads[0].Outcome)

	code, header, page := opsGet(t, http.DefaultClient, opsBase(a)+"/status")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "text/html; charset=utf-8", header.Get("Content-Type"))
	assert.Contains(t, string(page), `data-server="counter" data-state="ok"`)
	assert.NotContains(t, string(page), "tok-0123456789-do-not-show")
}

// TestOpsReadyzFollowsRequiredServer checks /readyz through the first load and a
// required server's crash: 503 while the load runs, 200 once it is done, 503 while
// the crashed server cannot restart, 200 again once it is back.
func TestOpsReadyzFollowsRequiredServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "may-start") // the first start waits for it
	broken := filepath.Join(dir, "broken")  // while it exists, starts fail
	script := `while [ ! -e "$1" ]; do sleep 0.05; done; if [ -e "$2" ]; then echo broken >&2; exit 3; fi; exec "$3" demo-server misbehave crash-after 1`
	config := `version: 1
servers:
  vital:
    required: true
    truely-stateless: true
    command: /bin/sh
    args: ['-c', ` + quoted(script) + `, sh, ` + quoted(gate) + `, ` + quoted(broken) + `, ` + quoted(binary) + `]
    connect_timeout: 20s
    transform: [{prefix: vital_}]
`
	a := serveConfig(t, httpTransport, config)
	ready := opsBase(a) + "/readyz"

	code, _, body := opsGet(t, http.DefaultClient, ready)
	assert.Equal(t, http.StatusServiceUnavailable, code, "while the first load runs: %s", body)
	assertJSONEqual(t, []byte(`{"ready":false,"notReady":["the first config load is still running"]}`), body)

	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	a.waitLoaded()
	code, _, body = opsGet(t, http.DefaultClient, ready)
	assert.Equal(t, http.StatusOK, code, "%s", body)
	assertJSONEqual(t, []byte(`{"ready":true}`), body)

	// Crash it, with restarts failing until the file goes.
	require.NoError(t, os.WriteFile(broken, nil, 0o644))
	c := a.connect()
	resp := c.callTool("vital_ping_tool", map[string]any{})
	require.NotEmpty(t, resp.Error, "the crashing call fails")
	relLogLine(t, a, relRecoverTimeout, `msg="lease lost"`, "server=vital")
	relLogLine(t, a, relRecoverTimeout, `msg="lease spawn-failed"`, "server=vital")
	code, _, body = opsGet(t, http.DefaultClient, ready)
	assert.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	var r struct {
		Ready    bool     `json:"ready"`
		NotReady []string `json:"notReady"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	require.Len(t, r.NotReady, 1)
	assert.Contains(t, r.NotReady[0], `required server "vital" is down`)
	st, _ := opsStatusJSON(t, a)
	require.Len(t, st.Servers, 1)
	assert.Equal(t, "down", st.Servers[0].State)
	assert.True(t, st.Servers[0].Required)
	assert.False(t, st.Ready)

	require.NoError(t, os.Remove(broken))
	relLogLine(t, a, relRecoverTimeout, `msg="lease restarted"`, "server=vital")
	code, _, body = opsGet(t, http.DefaultClient, ready)
	assert.Equal(t, http.StatusOK, code, "%s", body)

	fams := opsScrape(t, a)
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_upstream_crashes_total", map[string]string{"server": "vital"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_upstream_restarts_total", map[string]string{"server": "vital"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_server_up", map[string]string{"server": "vital"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_tool_calls_total", map[string]string{"server": "vital", "tool": "vital_ping_tool", "outcome": "error"}))
}

// TestOpsReloadsOnStatus edits the config while the gateway runs: the reload shows on
// /status.json and in mcp_aggregator_reloads_total, a broken edit as rejected.
func TestOpsReloadsOnStatus(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, demoToolsConfig())
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()

	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: [this is not a map\n"), 0o644))
	relLogLine(t, a, startTimeout, "config rejected")
	relLogLine(t, a, startTimeout, `msg="reload done"`)
	fams := opsScrape(t, a)
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_reloads_total", map[string]string{"outcome": "rejected"}))
	st, _ := opsStatusJSON(t, a)
	require.Len(t, st.Reloads, 2)
	assert.Equal(t, []string{"rejected", "ok"}, []string{st.Reloads[0].Outcome, st.Reloads[1].Outcome}, "newest first")
}

// TestOpsLeaseWaiting: a session's call that waits at lease.max_instances
// for an instance to lease is counted, as its server's "waiting", in
// mcp_status, /status.json, the status page and /metrics, until a lease
// frees and the call goes on; then none is.
func TestOpsLeaseWaiting(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false,
		"lease: {max_instances: 1, queue_timeout: 1m}")))
	a.waitLoaded()
	holder := a.connect()
	assert.Equal(t, 1, leaseValue(t, holder, "counter_increment"))

	other := a.connect()
	waiting := relStartCall(other, "counter_increment", map[string]any{}, nil)
	leaseWaitWaiting(t, holder, "counter", 1)
	st, _ := opsStatusJSON(t, a)
	require.Len(t, st.Servers, 1)
	assert.Equal(t, 1, st.Servers[0].Waiting, "/status.json")
	assert.Equal(t, 1.0, opsValue(t, opsScrape(t, a), "mcp_aggregator_lease_waiting", map[string]string{"server": "counter"}))
	code, _, page := opsGet(t, http.DefaultClient, opsBase(a)+"/status")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(page), `<tr data-server="counter"`)
	row, _, _ := strings.Cut(string(page[bytes.Index(page, []byte(`<tr data-server="counter"`)):]), "</tr>")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(row), `<td class="num">1</td>`), "the waiting column of the status page: %s", row)
	select {
	case o := <-waiting:
		t.Fatalf("the call went on while the only instance was leased: %+v", o)
	default:
	}

	released := leaseCall(t, holder, "mcp_release", map[string]any{"serverId": "counter"})
	require.False(t, released.IsError, "%s", released.Raw)
	got, err := leaseDecode(relResult(t, relAwait(t, waiting)))
	require.NoError(t, err)
	require.NotNil(t, got.Value)
	assert.Equal(t, 1, *got.Value, "the waiting session leased a clean instance")
	leaseWaitWaiting(t, other, "counter", 0)
	assert.Equal(t, 0.0, opsValue(t, opsScrape(t, a), "mcp_aggregator_lease_waiting", map[string]string{"server": "counter"}))
}
