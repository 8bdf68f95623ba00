package naming

import (
	"fmt"
	"strings"
)

// Exclusion is one upstream tool a filter kept out of the catalog.
type Exclusion struct {
	Tool    string // original name
	By      string // tools.whitelist (matched no pattern) or tools.blacklist
	Pattern string // the blacklist pattern that matched
}

// summaryNames bounds the names one summary lists.
const summaryNames = 10

// Summary describes the plan's exclusions in one line for the log, or "" when there
// are none: `12 of 40 tools excluded by tools.whitelist: a, b, c, …`. A server with
// many filtered tools thus costs one line per reload, not one per tool.
func (p Plan) Summary() string {
	if len(p.Excluded) == 0 {
		return ""
	}
	type group struct{ by, names string }
	var groups []group
	for _, by := range []string{"tools.whitelist", "tools.blacklist"} {
		var names []string
		for _, e := range p.Excluded {
			if e.By == by {
				names = append(names, e.Tool)
			}
		}
		if len(names) == 0 {
			continue
		}
		list := names
		more := ""
		if len(list) > summaryNames {
			list, more = list[:summaryNames], fmt.Sprintf(", … (%d more)", len(names)-summaryNames)
		}
		groups = append(groups, group{by: fmt.Sprintf("%d by %s", len(names), by), names: strings.Join(list, ", ") + more})
	}
	head := fmt.Sprintf("%d of %d tools excluded", len(p.Excluded), p.Offered)
	if len(groups) == 1 {
		_, by, _ := strings.Cut(groups[0].by, " by ")
		return fmt.Sprintf("%s by %s: %s", head, by, groups[0].names)
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.by + ": " + g.names
	}
	return head + ": " + strings.Join(parts, "; ")
}
