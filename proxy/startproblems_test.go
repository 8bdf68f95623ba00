package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// TestAddStartProblemsReplacesOnlyTheServersEarlierStartFailure: a start failure
// found while a reconcile runs shows at once among the last reconcile's problems,
// in place of an earlier start failure of the same server; every other problem,
// that server's others included, stays.
func TestAddStartProblemsReplacesOnlyTheServersEarlierStartFailure(t *testing.T) {
	p := newTestProxy(t)
	old := []config.Problem{
		{Severity: config.SeverityError, Server: "a", Message: startFailure + "exit status 1"},
		{Severity: config.SeverityWarning, Server: "a", Field: "tools.config.x", Message: "configured, but the server does not offer this tool"},
		{Severity: config.SeverityError, Server: "b", Message: startFailure + "not found"},
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	p.setProblems(old)
	now := config.Problem{Severity: config.SeverityError, Server: "a", Message: startFailure + "initialize: no answer before connect_timeout"}
	p.addStartProblems([]config.Problem{now})
	assert.ElementsMatch(t, []config.Problem{old[1], old[2], now}, p.current().problems)
}
