package naming

import "strings"

// Rename applies the transforms to name in order. A prefix step strips Remove when the
// current name starts with it, then prepends Add; a suffix step appends Add.
func Rename(name string, ts []Transform) string {
	for _, t := range ts {
		if t.Suffix {
			name += t.Add
			continue
		}
		name = t.Add + strings.TrimPrefix(name, t.Remove)
	}
	return name
}
