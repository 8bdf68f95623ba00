package naming

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRename(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ts   []Transform
		want string
	}{
		{"no transforms", "browser_click", nil, "browser_click"},
		{"prefix", "browser_click", []Transform{{Add: "playwright_"}}, "playwright_browser_click"},
		{"suffix", "browser_click", []Transform{{Suffix: true, Add: "_playwright"}}, "browser_click_playwright"},
		{"replace prefix when present", "stock_prefix_search", []Transform{{Remove: "stock_prefix_", Add: "my_prefix_"}}, "my_prefix_search"},
		{"replace prefix when absent only adds", "search", []Transform{{Remove: "stock_prefix_", Add: "my_prefix_"}}, "my_prefix_search"},
		{"remove only", "stock_search", []Transform{{Remove: "stock_"}}, "search"},
		{"tenex style", "read_file", []Transform{{Add: "mcp__fs__"}}, "mcp__fs__read_file"},
		{"steps apply in order", "stock_x", []Transform{
			{Add: "playwright_"},
			{Remove: "stock_", Add: "my_"}, // no longer a leading "stock_": only adds
			{Suffix: true, Add: "_pw"},
		}, "my_playwright_stock_x_pw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Rename(tt.in, tt.ts))
		})
	}
}

// FuzzRename checks that a prefix+suffix rename always produces add+name+suffix, with
// the removable prefix stripped exactly when present.
func FuzzRename(f *testing.F) {
	f.Add("browser_click", "playwright_", "stock_", "_pw")
	f.Add("stock_search", "my_", "stock_", "")
	f.Add("", "", "", "")
	f.Add("read_file", "mcp__fs__", "", "")
	f.Fuzz(func(t *testing.T, name, add, remove, suffix string) {
		got := Rename(name, []Transform{{Add: add, Remove: remove}, {Suffix: true, Add: suffix}})
		want := add + strings.TrimPrefix(name, remove) + suffix
		if got != want {
			t.Fatalf("Rename(%q) = %q, want %q", name, got, want)
		}
	})
}
