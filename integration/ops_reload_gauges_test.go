package integration

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpsReplacedInstanceIsDraining: a reload that changes a shared server while a call
// runs on it starts a successor and lets the old instance finish the call. Until it has,
// /metrics and /status.json list the old instance as draining, not as a second shared
// instance beside its successor; then it is gone from both.
func TestOpsReplacedInstanceIsDraining(t *testing.T) {
	t.Parallel()
	config := func(env string) string {
		return `version: 1
servers:
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {GENERATION: "` + env + `"}
    transform: [{prefix: demo_}]
`
	}
	path := writeConfig(t, config("1"))
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()
	c := a.connect()

	type instance struct {
		Server   string `json:"serverId"`
		PID      int    `json:"pid"`
		Role     string `json:"role"`
		InFlight int    `json:"inFlight"`
	}
	instances := func() []instance {
		_, raw := opsStatusJSON(t, a)
		var st struct {
			Instances []instance `json:"instances"`
		}
		require.NoError(t, json.Unmarshal(raw, &st))
		return st.Instances
	}
	slow := relStartCall(c, "demo_slow", map[string]any{"seconds": 3, "steps": 1}, nil)
	var old instance
	require.Eventually(t, func() bool {
		list := instances()
		if len(list) == 1 && list[0].InFlight == 1 {
			old = list[0]
			return true
		}
		return false
	}, callTimeout, 20*time.Millisecond, "the slow call never showed in flight")

	require.NoError(t, os.WriteFile(path, []byte(config("2")), 0o644))
	relLogLine(t, a, startTimeout, `msg="reload done"`)

	// The old pool is closed, and its instance marked, just after the new
	// state is committed; wait for it rather than for a log line.
	var roles map[string]int
	var replaced instance
	require.Eventually(t, func() bool {
		roles = map[string]int{}
		for _, in := range instances() {
			require.Equal(t, "demo", in.Server)
			roles[in.Role]++
			if in.PID == old.PID {
				replaced = in
			}
		}
		return roles["draining"] == 1
	}, callTimeout, 20*time.Millisecond, "the replaced instance never showed as draining: %v", roles)
	assert.Equal(t, "draining", replaced.Role, "the replaced instance finishing its call")
	assert.Equal(t, 1, replaced.InFlight)
	assert.Equal(t, map[string]int{"shared": 1, "draining": 1}, roles, "/status.json")
	fams := opsScrape(t, a)
	gauge := "mcp_aggregator_upstream_instances"
	assert.Equal(t, 1.0, opsValue(t, fams, gauge, map[string]string{"server": "demo", "state": "shared"}))
	assert.Equal(t, 1.0, opsValue(t, fams, gauge, map[string]string{"server": "demo", "state": "draining"}))

	out := relAwait(t, slow)
	require.Empty(t, out.resp.Error, "the call on the replaced instance finishes")
	require.Eventually(t, func() bool {
		fams := opsScrape(t, a)
		v, _ := opsSeries(fams, gauge, map[string]string{"server": "demo", "state": "draining"})
		return v == 0
	}, stopTimeout, 20*time.Millisecond, "the replaced instance is never closed")
	list := instances()
	require.Len(t, list, 1)
	assert.Equal(t, "shared", list[0].Role)
	assert.NotEqual(t, old.PID, list[0].PID)
}
