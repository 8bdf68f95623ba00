package config

import "fmt"

// EmptySources warns about the files of ws that define no server: a file
// of the right shape that is empty, or a client's config whose servers are
// all disabled, is more likely a mistake than an intent. `check` shows
// them; a running server does not, as an empty file is how one stops every
// server it ran.
func (ws *Workspace) EmptySources() []Problem {
	var out []Problem
	for _, s := range ws.Sources {
		if s.Servers == 0 {
			out = append(out, Problem{Severity: SeverityWarning, File: s.File,
				Message: fmt.Sprintf("defines no servers (read as %s); add servers, or check that this is the file you meant", s.Dialect)})
		}
	}
	return out
}
