package naming

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func exported(p Plan) []string {
	var names []string
	for _, t := range p.Tools {
		names = append(names, t.Exported)
	}
	return names
}

func findProblem(t *testing.T, p Plan, tool string) Problem {
	t.Helper()
	for _, pr := range p.Problems {
		if pr.Tool == tool {
			return pr
		}
	}
	require.Failf(t, "no problem", "no problem for tool %q in %v", tool, p.Problems)
	return Problem{}
}

func TestApplyPlaywrightSeedExample(t *testing.T) {
	rules := Rules{
		Server:     "playwright",
		Whitelist:  []string{"browser_*", "page_*"},
		Blacklist:  []string{"*_unsafe"},
		Transforms: []Transform{{Add: "playwright_"}},
	}
	plan := Apply(rules, []string{"browser_click", "browser_snapshot", "eval_unsafe", "browser_eval_unsafe", "install"}, nil)

	require.False(t, plan.Failed)
	// browser_eval_unsafe is blacklisted but whitelisted too: the whitelist cherry-picks it.
	// install matches neither list and is admitted because a blacklist is present.
	assert.Equal(t, []string{"playwright_browser_click", "playwright_browser_snapshot", "playwright_browser_eval_unsafe", "playwright_install"}, exported(plan))
	assert.Empty(t, plan.Problems, "a tool the config filters out is not a problem")
	assert.Equal(t, []Exclusion{{Tool: "eval_unsafe", By: "tools.blacklist", Pattern: "*_unsafe"}}, plan.Excluded)
	assert.Equal(t, 5, plan.Offered)
}

func TestApplyFilters(t *testing.T) {
	upstream := []string{"read_file", "write_file", "delete_file", "search"}
	tests := []struct {
		name      string
		white     []string
		black     []string
		want      []string
		dropField string
	}{
		{"no filters admit all", nil, nil, upstream, ""},
		{"whitelist only restricts", []string{"read_*", "search"}, nil, []string{"read_file", "search"}, "tools.whitelist"},
		{"blacklist only drops", nil, []string{"delete_*", "write_*"}, []string{"read_file", "search"}, "tools.blacklist"},
		{"whitelist cherry-picks from blacklist", []string{"write_file"}, []string{"*_file"}, []string{"write_file", "search"}, "tools.blacklist"},
		{"star whitelist", []string{"*"}, nil, upstream, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Apply(Rules{Server: "fs", Whitelist: tt.white, Blacklist: tt.black}, upstream, nil)
			assert.False(t, plan.Failed)
			assert.Equal(t, tt.want, exported(plan))
			assert.Empty(t, plan.Problems)
			for _, e := range plan.Excluded {
				assert.Equal(t, tt.dropField, e.By)
			}
			assert.Len(t, plan.Excluded, len(upstream)-len(tt.want))
		})
	}
}

func TestApplyExclusionSummary(t *testing.T) {
	var upstream []string
	for i := range 40 {
		upstream = append(upstream, fmt.Sprintf("t%02d", i))
	}
	tests := []struct {
		name  string
		rules Rules
		want  string
	}{
		{"nothing excluded", Rules{}, ""},
		{"whitelist", Rules{Whitelist: []string{"t0*", "t1*", "t2*"}},
			"10 of 40 tools excluded by tools.whitelist: t30, t31, t32, t33, t34, t35, t36, t37, t38, t39"},
		{"long lists are cut", Rules{Whitelist: []string{"t0*"}},
			"30 of 40 tools excluded by tools.whitelist: t10, t11, t12, t13, t14, t15, t16, t17, t18, t19, … (20 more)"},
		{"blacklist", Rules{Whitelist: []string{"t00"}, Blacklist: []string{"t0*"}},
			"9 of 40 tools excluded by tools.blacklist: t01, t02, t03, t04, t05, t06, t07, t08, t09"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rules.Server = "s"
			plan := Apply(tt.rules, upstream, nil)
			assert.Equal(t, tt.want, plan.Summary())
			assert.Empty(t, plan.Problems)
		})
	}
}

func TestApplyTransforms(t *testing.T) {
	tests := []struct {
		name string
		ts   []Transform
		in   string
		want string
	}{
		{"replace stock prefix", []Transform{{Remove: "stock_prefix_", Add: "my_prefix_"}}, "stock_prefix_search", "my_prefix_search"},
		{"tenex", []Transform{{Add: "mcp__fs__"}}, "read_file", "mcp__fs__read_file"},
		{"suffix", []Transform{{Suffix: true, Add: "_playwright"}}, "click", "click_playwright"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Apply(Rules{Server: "s", Transforms: tt.ts}, []string{tt.in}, nil)
			require.Len(t, plan.Tools, 1)
			assert.Equal(t, Tool{Original: tt.in, Exported: tt.want}, plan.Tools[0])
		})
	}
}

func TestApplyStrictMode(t *testing.T) {
	rules := Rules{
		Server: "customers",
		Strict: true,
		Config: map[string]Settings{
			"get_customer":    {MaxInstances: 10},
			"delete_customer": {MaxInstances: 1},
		},
	}
	plan := Apply(rules, []string{"get_customer", "list_customers"}, nil)

	assert.True(t, plan.Failed)
	assert.Equal(t, []string{"get_customer"}, exported(plan))

	p := findProblem(t, plan, "list_customers")
	assert.True(t, p.Error)
	assert.Contains(t, p.Message, "mode: strict")
	assert.Contains(t, p.Message, "missing tool: list_customers")
	assert.Contains(t, p.Message, "configured tools: [delete_customer, get_customer]")
	assert.Contains(t, p.Message, "add tools.config.list_customers")
	assert.Contains(t, p.Message, "set tools.mode to dynamic")

	gone := findProblem(t, plan, "delete_customer")
	assert.False(t, gone.Error)
	assert.Equal(t, "tools.config.delete_customer", gone.Field)
	assert.Contains(t, gone.Message, "does not offer")
}

func TestApplyStrictModeFilteredToolsNeedNoConfig(t *testing.T) {
	rules := Rules{Server: "s", Strict: true, Blacklist: []string{"secret_*"}, Config: map[string]Settings{"ok": {}}}
	plan := Apply(rules, []string{"ok", "secret_thing"}, nil)
	assert.False(t, plan.Failed)
	assert.Equal(t, []string{"ok"}, exported(plan))
}

func TestApplySettingsMerge(t *testing.T) {
	rules := Rules{
		Server:   "s",
		Defaults: Settings{Timeout: 30 * time.Second, MaxInstances: 10},
		Config: map[string]Settings{
			"both":    {Timeout: time.Minute, MaxInstances: 20},
			"timeout": {Timeout: 2 * time.Minute},
			"max":     {MaxInstances: 3},
		},
	}
	plan := Apply(rules, []string{"both", "timeout", "max", "none"}, nil)
	require.Len(t, plan.Tools, 4)
	assert.Equal(t, Settings{Timeout: time.Minute, MaxInstances: 20}, plan.Tools[0].Settings)
	assert.Equal(t, Settings{Timeout: 2 * time.Minute, MaxInstances: 10}, plan.Tools[1].Settings)
	assert.Equal(t, Settings{Timeout: 30 * time.Second, MaxInstances: 3}, plan.Tools[2].Settings)
	assert.Equal(t, Settings{Timeout: 30 * time.Second, MaxInstances: 10}, plan.Tools[3].Settings)
}

func TestApplyValidity(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		name     string
		rules    Rules
		upstream string
		field    string
	}{
		{"invalid original is never normalized", Rules{}, "read file", ""},
		{"too long after prefix", Rules{Transforms: []Transform{{Add: "prefix_"}}}, long, "transform"},
		{"dot not allowed by default", Rules{}, "fs.read", ""},
		{"custom pattern", Rules{ValidPattern: `^[a-z]+$`}, "read_file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rules.Server = "s"
			plan := Apply(tt.rules, []string{tt.upstream, "ok"}, nil)
			assert.False(t, plan.Failed)
			assert.Equal(t, []string{"ok"}, exported(Apply(Rules{}, []string{"ok"}, nil)))
			for _, tool := range plan.Tools {
				assert.NotEqual(t, tt.upstream, tool.Original)
			}
			p := findProblem(t, plan, tt.upstream)
			assert.False(t, p.Error)
			assert.Equal(t, tt.field, p.Field)
			assert.Contains(t, p.Message, "skipped")
		})
	}
}

func TestApplyCustomPatternAllowsDots(t *testing.T) {
	plan := Apply(Rules{Server: "s", ValidPattern: `^[a-zA-Z0-9_.-]{1,64}$`}, []string{"fs.read"}, nil)
	assert.Equal(t, []string{"fs.read"}, exported(plan))
}

func TestApplyBadPatternFails(t *testing.T) {
	plan := Apply(Rules{Server: "s", ValidPattern: `([`}, []string{"a"}, nil)
	assert.True(t, plan.Failed)
	assert.Empty(t, plan.Tools)
	assert.Equal(t, "naming.valid_pattern", plan.Problems[0].Field)
}

func TestApplyIntraServerCollision(t *testing.T) {
	rules := Rules{Server: "s", Transforms: []Transform{{Remove: "old_"}}}
	plan := Apply(rules, []string{"old_search", "search"}, nil)
	assert.True(t, plan.Failed)
	p := findProblem(t, plan, "search")
	assert.True(t, p.Error)
	assert.Contains(t, p.Message, `"old_search" and "search" are both exported as "search"`)
}

func TestApplyDuplicateUpstreamNames(t *testing.T) {
	plan := Apply(Rules{Server: "s"}, []string{"a", "b", "a"}, nil)
	assert.True(t, plan.Failed)
	assert.Equal(t, []string{"a", "b"}, exported(plan))
	assert.Contains(t, findProblem(t, plan, "a").Message, "more than once")
}

func TestApplyOwnedByAnotherServer(t *testing.T) {
	owners := map[string]string{"search": "web", "mcp_release": "mcp_admin", "read_file": "fs"}
	owner := func(name string) (string, bool) {
		s, ok := owners[name]
		return s, ok
	}
	plan := Apply(Rules{Server: "fs"}, []string{"search", "mcp_release", "read_file", "write_file"}, owner)

	assert.False(t, plan.Failed, "losing a name to another server is a warning")
	// read_file is owned by fs itself (its previous catalog), so it is kept.
	assert.Equal(t, []string{"read_file", "write_file"}, exported(plan))
	p := findProblem(t, plan, "search")
	assert.False(t, p.Error)
	assert.Contains(t, p.Message, `owned by "web"`)
	assert.Contains(t, p.Message, `server "fs"`)
	assert.Contains(t, findProblem(t, plan, "mcp_release").Message, `"mcp_admin"`)
	assert.Equal(t, []string{"search", "mcp_release"}, plan.Yielded, "the names held by other owners, to take once they are free")
	assert.NotContains(t, findProblem(t, plan, "mcp_release").Message, "admin.enabled", "no reserved owner was named")

	reserved := Apply(Rules{Server: "fs", Reserved: "mcp_admin"}, []string{"mcp_release"}, owner)
	assert.Contains(t, findProblem(t, reserved, "mcp_release").Message, "admin.enabled: false", "a name the aggregator's own tools keep is fixed on the upstream side")
}

func TestApplyNoTools(t *testing.T) {
	plan := Apply(Rules{Server: "s"}, nil, nil)
	require.Len(t, plan.Problems, 1)
	assert.False(t, plan.Problems[0].Error)
	assert.False(t, plan.Failed)
	assert.Contains(t, plan.Problems[0].Message, "returned no tools")
}

func TestPlanSummaryBothFilters(t *testing.T) {
	plan := Plan{Offered: 5, Excluded: []Exclusion{{Tool: "a", By: "tools.blacklist", Pattern: "a*"}, {Tool: "b", By: "tools.whitelist"}}}
	assert.Equal(t, "2 of 5 tools excluded: 1 by tools.whitelist: b; 1 by tools.blacklist: a", plan.Summary())
}

// TestProblemsQuoteBoundedNames: a name an upstream sends may be of any length; the
// problem about it quotes its start and says how long it was.
func TestProblemsQuoteBoundedNames(t *testing.T) {
	long := strings.Repeat("é", 2500) // 5000 bytes, never a valid name
	plan := Apply(Rules{Server: "s"}, []string{long, "ok"}, nil)
	assert.Equal(t, []string{"ok"}, exported(plan))
	require.Len(t, plan.Problems, 1)
	p := plan.Problems[0]
	assert.LessOrEqual(t, len(p.Tool), maxShownName+len("… (5000 bytes)"))
	assert.Contains(t, p.Tool, "(5000 bytes)")
	assert.LessOrEqual(t, len(p.Message), maxShownMessage+len("… (99999 bytes)"))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(p.Tool, "… (5000 bytes)")), "cut at a rune boundary")
}
