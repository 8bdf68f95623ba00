package ops

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

func serveOnce(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

func TestHealthzAndMethods(t *testing.T) {
	r := newRig(t)
	w := serveOnce(t, r.ops.Healthz(), http.MethodGet, "/healthz")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "ok\n", w.Body.String())
	for _, h := range []http.Handler{r.ops.Healthz(), r.ops.Readyz(), r.ops.Metrics(), r.ops.StatusJSON(), r.ops.StatusPage()} {
		w := serveOnce(t, h, http.MethodPost, "/x")
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
		assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	}
}

func probeReady(t *testing.T, r *rig) (int, map[string]any) {
	t.Helper()
	w := serveOnce(t, r.ops.Readyz(), http.MethodGet, "/readyz")
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return w.Code, body
}

func TestReadyzFollowsLoadAndRequiredServers(t *testing.T) {
	r := newRig(t)
	code, body := probeReady(t, r)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, map[string]any{"ready": false, "notReady": []any{"the first config load is still running"}}, body)

	// A required server that cannot start keeps the gateway unready and is named.
	report := r.load(t, demoConfig(`  broken:
    required: true
    command: /nonexistent/mcp-server
    connect_timeout: 2s
`))
	require.Equal(t, []string{"broken"}, report.Failed)
	code, body = probeReady(t, r)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	require.Len(t, body["notReady"], 1)
	assert.Contains(t, body["notReady"].([]any)[0], `required server "broken"`)

	// Not required any more: ready.
	r.load(t, demoConfig(""))
	code, body = probeReady(t, r)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"ready": true}, body)
}

func TestStatusJSONAndPageKeepSecretsOutAndEscape(t *testing.T) {
	r := newRig(t)
	const secret = "s3cr3t-token-value"
	r.secrets.Add(secret)
	hostile := `<script>alert("x")</script> token ` + secret
	r.load(t, demoConfig(""), config.Problem{Severity: config.SeverityWarning, Message: hostile})

	w := serveOnce(t, r.ops.StatusJSON(), http.MethodGet, "/status.json")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.NotContains(t, w.Body.String(), secret)
	var st Snapshot
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &st))
	assert.True(t, st.Ready)
	assert.Equal(t, "1.2.3-test", st.Version)
	require.Len(t, st.Servers, 1)
	assert.Equal(t, "tools", st.Servers[0].ID)
	assert.Equal(t, stateOK, st.Servers[0].State)
	assert.Equal(t, "shared", st.Servers[0].Mode)
	assert.Positive(t, st.Servers[0].Tools)
	require.Len(t, st.Instances, 1)
	assert.Equal(t, "shared", st.Instances[0].Role)
	require.Len(t, st.Problems, 1)
	assert.Contains(t, st.Problems[0], `<script>alert("x")</script> token <redacted>`)
	require.Len(t, st.Reloads, 1)
	assert.Equal(t, proxy.ReloadOK, st.Reloads[0].Outcome)

	w = serveOnce(t, r.ops.StatusPage(), http.MethodGet, "/status")
	require.Equal(t, http.StatusOK, w.Code)
	page := w.Body.String()
	assert.NotContains(t, page, secret)
	assert.NotContains(t, page, `<script>alert`)
	assert.Contains(t, page, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`)
	assert.Contains(t, page, `data-server="tools" data-state="ok"`)
	assert.NotContains(t, page, "http://", "no external asset")
	assert.NotContains(t, page, "https://", "no external asset")
	csp := w.Header().Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	nonce := strings.TrimSuffix(strings.SplitN(strings.SplitN(csp, "script-src 'nonce-", 2)[1], "'", 2)[0], "'")
	assert.Contains(t, page, `<script nonce="`+nonce+`">`)
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
}

func TestServerState(t *testing.T) {
	assert.Equal(t, stateOK, serverState("ok"))
	assert.Equal(t, stateDown, serverState("down: exit status 1; restarting with backoff"))
	assert.Equal(t, stateDown, serverState("down; restarting"))
	assert.Equal(t, stateFailed, serverState("failed: cannot start; fix the config to retry"))
}

// scrape gathers /metrics as parsed families.
func scrape(t *testing.T, r *rig) map[string]*dto.MetricFamily {
	t.Helper()
	w := serveOnce(t, r.ops.Metrics(), http.MethodGet, "/metrics")
	require.Equal(t, http.StatusOK, w.Code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(w.Body)
	require.NoError(t, err)
	return fams
}

func gaugeValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	fam := fams[name]
	require.NotNil(t, fam, "no family %s", name)
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if assert.ObjectsAreEqual(labels, got) || (len(labels) == 0 && len(got) == 0) {
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("%s has no series %v", name, labels)
	return 0
}

func TestMetricsExposition(t *testing.T) {
	r := newRig(t)
	r.load(t, demoConfig(""))
	echo, ok := r.proxy.Catalog().Lookup("echo")
	require.True(t, ok)
	r.rec.ToolCalled(echo, proxy.CallOK, 3*time.Millisecond)
	r.rec.InstanceEvent("tools", "restarted")

	fams := scrape(t, r)
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "mcp_aggregator_tool_calls_total",
		"mcp_aggregator_tool_call_duration_seconds", "mcp_aggregator_sessions", "mcp_aggregator_upstream_instances",
		"mcp_aggregator_leases", "mcp_aggregator_reloads_total", "mcp_aggregator_upstream_restarts_total"} {
		assert.Contains(t, fams, name)
	}
	assert.Equal(t, 1.0, gaugeValue(t, fams, "mcp_aggregator_tool_calls_total", map[string]string{"server": "tools", "tool": "echo", "outcome": "ok"}))
	assert.Equal(t, 1.0, gaugeValue(t, fams, "mcp_aggregator_upstream_instances", map[string]string{"server": "tools", "state": "shared"}))
	assert.Equal(t, 0.0, gaugeValue(t, fams, "mcp_aggregator_upstream_instances", map[string]string{"server": "tools", "state": "leased"}))
	assert.Equal(t, 0.0, gaugeValue(t, fams, "mcp_aggregator_sessions", nil))
	assert.Equal(t, 1.0, gaugeValue(t, fams, "mcp_aggregator_reloads_total", map[string]string{"outcome": "ok"}))
	assert.Equal(t, 1.0, gaugeValue(t, fams, "mcp_aggregator_upstream_restarts_total", map[string]string{"server": "tools"}))
	assert.Equal(t, 1.0, gaugeValue(t, fams, "mcp_aggregator_server_up", map[string]string{"server": "tools"}))
	assert.Equal(t, 1.0, gaugeValue(t, fams, "mcp_aggregator_ready", nil))
	hist := fams["mcp_aggregator_tool_call_duration_seconds"].GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(1), hist.GetSampleCount())
	assert.InDelta(t, 0.003, hist.GetSampleSum(), 1e-9)

	for name := range fams {
		if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			assert.True(t, strings.HasPrefix(name, "mcp_aggregator_"), name)
		}
	}
}

func TestMetricsFollowPrometheusConventions(t *testing.T) {
	r := newRig(t)
	r.load(t, demoConfig(""))
	r.rec.ToolCalled(nil, proxy.CallError, time.Millisecond)
	r.rec.InstanceEvent("tools", "lost")
	w := serveOnce(t, r.ops.Metrics(), http.MethodGet, "/metrics")
	problems, err := promlint.New(strings.NewReader(w.Body.String())).Lint()
	require.NoError(t, err)
	var ours []promlint.Problem
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "mcp_aggregator_") {
			ours = append(ours, p)
		}
	}
	assert.Empty(t, ours)
}

func TestStatusPageContentPart(t *testing.T) {
	r := newRig(t)
	r.load(t, demoConfig(""))
	w := serveOnce(t, r.ops.StatusPage(), http.MethodGet, "/status?part=content")
	require.Equal(t, http.StatusOK, w.Code)
	part := w.Body.String()
	assert.True(t, strings.HasPrefix(part, `<main id="content">`), part)
	assert.Contains(t, part, `data-server="tools" data-state="ok"`)
	assert.NotContains(t, part, "<script")
	assert.NotContains(t, part, "<style")
}
