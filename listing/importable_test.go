package listing

import (
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/stretchr/testify/assert"
)

func TestReportImport(t *testing.T) {
	const (
		unread  = "no server could be read; nothing was written"
		none    = "the files define no server to import (none, or only disabled ones); nothing was written"
		closing = "nothing was written, since the result would not run as it is; fix the errors above and import again (variables not set yet are warnings only)"
	)
	unset := config.Problem{Severity: config.SeverityError, File: "mcp-aggregator.yaml", Line: 9, Server: "a", Field: "env.K", Message: "variable K is not set", Environment: true}
	noCommand := config.Problem{Severity: config.SeverityError, File: "mcp-aggregator.yaml", Line: 11, Server: "b", Field: "command", Message: "required"}
	badURL := config.Problem{Severity: config.SeverityError, File: "mcp-aggregator.yaml", Line: 14, Server: "my server", Field: "url", Message: "not a valid URL"}
	notOnPath := config.Problem{Severity: config.SeverityWarning, File: "mcp-aggregator.yaml", Line: 8, Server: "a", Field: "command", Message: "not found on PATH"}
	unreadFile := config.Problem{Severity: config.SeverityError, File: "b.json", Line: 1, Message: "invalid JSON"}
	renamed := config.Problem{Severity: config.SeverityWarning, File: "a.json", Line: 2, Server: "Brave-Search", Message: "read as Brave-Search"}
	origins := map[string]config.Origin{"a": {File: "dir/a.json", Line: 2}, "b": {File: "dir/a.json", Line: 3}, "my server": {File: "n.yaml", Line: 4}}
	asWarning := func(p config.Problem) config.Problem { p.Severity = config.SeverityWarning; return p }
	unplaced := func(p config.Problem) config.Problem { p.File, p.Line = "", 0; return p }

	tests := []struct {
		name        string
		translation []config.Problem
		checked     []config.Problem
		origins     map[string]config.Origin
		want        ImportReport
	}{
		{"clean", nil, nil, origins, ImportReport{}},
		{"warnings only", []config.Problem{renamed}, []config.Problem{notOnPath}, origins,
			ImportReport{Checked: []config.Problem{notOnPath}}},
		{"variables not set are warnings", nil, []config.Problem{notOnPath, unset}, origins,
			ImportReport{Checked: []config.Problem{notOnPath, asWarning(unset)}}},
		{"a server that cannot run", nil, []config.Problem{unset, noCommand, noCommand}, origins, ImportReport{
			Checked: []config.Problem{unplaced(asWarning(unset)), unplaced(noCommand), unplaced(noCommand)},
			Refusal: []string{
				`server "b" (from dir/a.json line 3) cannot run as imported: fix it in dir/a.json as the errors above say, or leave it out with --exclude b`,
				closing,
			}}},
		{"each server named once, quoted for the shell", nil, []config.Problem{badURL, noCommand}, origins, ImportReport{
			Checked: []config.Problem{unplaced(badURL), unplaced(noCommand)},
			Refusal: []string{
				`server "my server" (from n.yaml line 4) cannot run as imported: fix it in n.yaml as the errors above say, or leave it out with --exclude 'my server'`,
				`server "b" (from dir/a.json line 3) cannot run as imported: fix it in dir/a.json as the errors above say, or leave it out with --exclude b`,
				closing,
			}}},
		{"a server of no known origin", nil, []config.Problem{noCommand}, map[string]config.Origin{"a": {File: "x.json", Line: 1}}, ImportReport{
			Checked: []config.Problem{unplaced(noCommand)},
			Refusal: []string{`server "b" cannot run as imported: fix it in its file as the errors above say, or leave it out with --exclude b`, closing}}},
		{"an error of the translation", []config.Problem{unreadFile}, []config.Problem{notOnPath}, origins, ImportReport{
			Checked: []config.Problem{unplaced(notOnPath)},
			Refusal: []string{closing}}},
		{"a server the translation refuses", []config.Problem{{Severity: config.SeverityError, File: "a.json", Line: 3, Server: "b", Message: "defined again"}}, []config.Problem{noCommand}, origins, ImportReport{
			Checked: []config.Problem{unplaced(noCommand)},
			Refusal: []string{
				`server "b" (from dir/a.json line 3) cannot run as imported: fix it in dir/a.json as the errors above say, or leave it out with --exclude b`,
				closing,
			}}},
		{"an error of the config as a whole", nil, []config.Problem{{Severity: config.SeverityError, Field: "limits.max_concurrent", Message: "bad"}}, origins, ImportReport{
			Checked: []config.Problem{{Severity: config.SeverityError, Field: "limits.max_concurrent", Message: "bad"}},
			Refusal: []string{closing}}},
		{"no server", nil, nil, nil, ImportReport{Refusal: []string{none}}},
		{"no server, variables not set", nil, []config.Problem{{Severity: config.SeverityError, Field: "http.auth.tokens.bot", Message: "NOPE is not set", Environment: true}}, nil, ImportReport{
			Checked: []config.Problem{{Severity: config.SeverityWarning, Field: "http.auth.tokens.bot", Message: "NOPE is not set", Environment: true}},
			Refusal: []string{none}}},
		{"no server read", []config.Problem{unreadFile}, nil, nil, ImportReport{Refusal: []string{unread}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReportImport(tt.translation, tt.checked, tt.origins)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, len(tt.want.Refusal) > 0, got.Refused())
		})
	}
}

func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"github": "github", "my.server_v2-x": "my.server_v2-x", "Brave Search": "'Brave Search'",
		"it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'",
	} {
		assert.Equal(t, want, shellWord(in), in)
	}
}
