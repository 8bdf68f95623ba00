package ops

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadyzStatusAndMetricsWhileDraining(t *testing.T) {
	r := newRig(t)
	var draining atomic.Bool
	r.ops = New(r.proxy, r.rec, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test",
		Draining: draining.Load})
	r.load(t, demoConfig(""))
	code, body := probeReady(t, r)
	require.Equal(t, http.StatusOK, code, "%v", body)
	drainingGauge := func() float64 {
		return testutil.ToFloat64(&gaugeOf{r.ops, "mcp_aggregator_draining"})
	}
	assert.Equal(t, 0.0, drainingGauge())

	draining.Store(true)
	code, body = probeReady(t, r)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, map[string]any{"ready": false, "draining": true, "notReady": []any{notReadyDraining}}, body)

	// The balancer's probe: 404 while draining, which HAProxy's
	// disable-on-404 reads as "sticky traffic only".
	w := serveOnce(t, r.ops.Readyz(), http.MethodGet, "/readyz?draining=404")
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Contains(t, w.Body.String(), `"draining": true`)

	var snap map[string]any
	w = serveOnce(t, r.ops.StatusJSON(), http.MethodGet, "/status.json")
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &snap))
	assert.Equal(t, true, snap["draining"])
	assert.Equal(t, false, snap["ready"])
	assert.Equal(t, 1.0, drainingGauge())

	// Not ready for another reason too: 503 even with ?draining=404, so a
	// broken replica is taken out for good.
	r.load(t, demoConfig(`  broken:
    required: true
    command: /nonexistent/mcp-server
    connect_timeout: 2s
`))
	w = serveOnce(t, r.ops.Readyz(), http.MethodGet, "/readyz?draining=404")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), `required server \"broken\"`)
}

// gaugeOf collects one metric of the state collector by name.
type gaugeOf struct {
	o    *Ops
	name string
}

func (g *gaugeOf) Describe(ch chan<- *prometheus.Desc) { (&stateCollector{o: g.o}).Describe(ch) }

func (g *gaugeOf) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 256)
	go func() {
		(&stateCollector{o: g.o}).Collect(all)
		close(all)
	}()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+g.name+`"`) {
			ch <- m
		}
	}
}
