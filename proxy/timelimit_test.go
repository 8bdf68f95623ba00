package proxy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// TestToolLimitNamesTheSettingInForce: a call's limit is named after the
// setting that set it, whichever of the three it is.
func TestToolLimitNamesTheSettingInForce(t *testing.T) {
	tests := []struct {
		name        string
		defaults    config.ToolSettings
		config      map[string]config.ToolSettings
		wantD       time.Duration
		wantSetting string
	}{
		{"nothing per tool", config.ToolSettings{}, nil, time.Minute, "request_timeout"},
		{"defaults", config.ToolSettings{Timeout: 2 * time.Second}, nil, 2 * time.Second, "tools.defaults.timeout"},
		{"own entry over defaults", config.ToolSettings{Timeout: 2 * time.Second},
			map[string]config.ToolSettings{"slow": {Timeout: 3 * time.Second}}, 3 * time.Second, "tools.config.slow.timeout"},
		{"own entry without a timeout keeps the defaults'", config.ToolSettings{Timeout: 2 * time.Second},
			map[string]config.ToolSettings{"slow": {MaxInstances: 1}}, 2 * time.Second, "tools.defaults.timeout"},
		{"another tool's entry", config.ToolSettings{},
			map[string]config.ToolSettings{"fast": {Timeout: time.Second}}, time.Minute, "request_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &config.Server{ID: "demo", RequestTimeout: time.Minute}
			s.Tools.Defaults, s.Tools.Config = tt.defaults, tt.config
			// The entry as a commit plans it.
			_, entries := catalog.Plan(s, []string{"slow"}, map[string]json.RawMessage{"slow": json.RawMessage(`{"name":"slow","inputSchema":{"type":"object"}}`)}, catalog.Empty(), "")
			require.Len(t, entries, 1)
			got := toolLimit(s, entries[0])
			assert.Equal(t, tt.wantD, got.d)
			assert.Equal(t, tt.wantSetting, got.setting)
			assert.Zero(t, testing.AllocsPerRun(10, func() { toolLimit(s, entries[0]) }), "a call makes no name of its own")
		})
	}
}
