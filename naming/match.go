package naming

import "strings"

// Match reports whether name matches pattern, where `*` matches any run of characters
// (including none) and every other character matches itself. The match is anchored at both
// ends, so "browser_*" matches "browser_click" but not "my_browser_click".
func Match(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) ||
		!strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	// The middle pieces must appear in order between the fixed prefix and suffix.
	// Taking the leftmost occurrence of each piece is always safe: it leaves the
	// most room for the pieces that follow.
	rest := name[len(first) : len(name)-len(last)]
	for _, piece := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, piece)
		if i < 0 {
			return false
		}
		rest = rest[i+len(piece):]
	}
	return true
}

// matchAny returns the first pattern that matches name, and whether one did.
func matchAny(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		if Match(p, name) {
			return p, true
		}
	}
	return "", false
}
