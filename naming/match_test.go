package naming

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "anything", true},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"browser_click", "browser_click", true},
		{"browser_click", "browser_clicks", false},
		{"browser_*", "browser_click", true},
		{"browser_*", "browser_", true},
		{"browser_*", "my_browser_click", false},
		{"*_unsafe", "exec_unsafe", true},
		{"*_unsafe", "exec_unsafe_really", false},
		{"*_file_*", "read_file_sync", true},
		{"*_file_*", "read_files", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"**", "x", true},
		{"ab*ba", "aba", false},
		// Only * is special: regexp and glob metacharacters match themselves.
		{"browser.click", "browserXclick", false},
		{"browser.click", "browser.click", true},
		{"tool?", "tool1", false},
		{"[ab]", "a", false},
		{"[ab]", "[ab]", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Match(tt.pattern, tt.name))
		})
	}
}

// FuzzMatch checks Match against properties that must hold for any input: no panics,
// every name matches itself and "*", and a pattern made by replacing any run of the
// name with "*" still matches.
func FuzzMatch(f *testing.F) {
	f.Add("browser_*", "browser_click")
	f.Add("*_unsafe", "exec_unsafe")
	f.Add("a*b*c", "axbyc")
	f.Add("*", "")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got := Match(pattern, name)
		if !strings.Contains(pattern, "*") && got != (pattern == name) {
			t.Fatalf("Match(%q, %q) = %v without wildcards", pattern, name, got)
		}
		if !strings.Contains(name, "*") && !Match(name, name) {
			t.Fatalf("%q does not match itself", name)
		}
		if !Match("*", name) {
			t.Fatalf("* does not match %q", name)
		}
		if len(name) >= 2 && !strings.Contains(name, "*") {
			mid := len(name) / 2
			if !Match(name[:1]+"*"+name[mid:], name) {
				t.Fatalf("wildcard pattern built from %q does not match it", name)
			}
		}
	})
}
