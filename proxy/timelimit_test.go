package proxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
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
			// The entry's settings as the naming plan merges them.
			plan := naming.Apply(catalog.RulesFor(s, ""), []string{"slow"}, nil)
			e := &catalog.Entry{Exported: "demo_slow", Server: "demo", Original: "slow", Settings: plan.Tools[0].Settings}
			got := toolLimit(s, e)
			assert.Equal(t, tt.wantD, got.d)
			assert.Equal(t, tt.wantSetting, got.setting)
		})
	}
}
