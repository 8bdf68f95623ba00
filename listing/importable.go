package listing

import (
	"fmt"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// ImportReport is what `import` says of its translation on stderr, and
// whether it writes it.
type ImportReport struct {
	// Checked is what checking the result found, as import shows it: an
	// error that setting a variable clears is a warning, and when the result
	// is refused no problem points into it (it was never written).
	Checked []config.Problem
	// Refusal says why the result is not written, a line each (inert text),
	// the last saying that nothing was; empty when it is written.
	Refusal []string
}

// Refused reports whether the result must not be written.
func (r ImportReport) Refused() bool { return len(r.Refusal) > 0 }

// ReportImport applies the rule by which `import` writes its translation or
// refuses it: translation is what the translation found, checked what loading
// its result as a config found, and origins where each server of the result
// was defined (config.Imported).
//
// The result is written only when it would run once the variables it reads
// are set. Any error of the translation (a file or an entry that could not be
// read, a server a file defines twice, an --exclude that names no server) or
// of the check that is not the environment's (config.Problem.Environment: a
// variable not set, an env_file not there yet, which the user provides later)
// refuses it whole: a config with a server missing or broken looks finished
// and is not. Each server at fault is named, with where it was defined and
// the two ways out: fix it there, or leave it out with --exclude.
// A result with no server is refused too: an empty config written over a
// watched one would stop every server it runs.
func ReportImport(translation, checked []config.Problem, origins map[string]config.Origin) ImportReport {
	var r ImportReport
	failing, untranslated := []string{}, config.HasErrors(translation)
	seen := map[string]bool{}
	for _, p := range translation {
		if p.Severity == config.SeverityError && p.Server != "" && !seen[p.Server] {
			seen[p.Server] = true
			failing = append(failing, p.Server)
		}
	}
	for _, p := range checked {
		if p.Severity == config.SeverityError && p.Environment {
			p.Severity = config.SeverityWarning
		}
		if p.Severity == config.SeverityError && p.Server != "" && !seen[p.Server] {
			seen[p.Server] = true
			failing = append(failing, p.Server)
		}
		r.Checked = append(r.Checked, p)
	}
	refused := untranslated || config.HasErrors(r.Checked)
	switch {
	case len(origins) == 0 && untranslated:
		r.Refusal = []string{"no server could be read; nothing was written"}
	case refused:
		for _, id := range failing {
			where, fix := "", "fix it in its file"
			if o, ok := origins[id]; ok {
				where, fix = " (from "+o.String()+")", "fix it in "+o.File
			}
			r.Refusal = append(r.Refusal, inert(fmt.Sprintf("server %q%s cannot run as imported: %s as the errors above say, or leave it out with --exclude %s",
				id, where, fix, shellWord(id))))
		}
		r.Refusal = append(r.Refusal, "nothing was written, since the result would not run as it is; fix the errors above and import again (variables not set yet are warnings only)")
	case len(origins) == 0:
		r.Refusal = []string{"the files define no server to import (none, or only disabled ones); nothing was written"}
	}
	if r.Refused() {
		for i := range r.Checked {
			r.Checked[i].File, r.Checked[i].Line = "", 0
		}
	}
	return r
}

// shellWord is id as a word of a POSIX shell command line.
func shellWord(id string) string {
	if id != "" && strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == "" {
		return id
	}
	return "'" + strings.ReplaceAll(id, "'", `'\''`) + "'"
}
