package listing

import (
	"fmt"
	"io"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// Problems writes each problem on a line of its own (a problem may quote
// what an upstream said, an error or a name: its text is made inert) and
// counts them by severity.
func Problems(w io.Writer, problems []config.Problem) (errors, warnings int) {
	for _, p := range problems {
		fmt.Fprintln(w, inertLines(p.String()))
		if p.Severity == config.SeverityError {
			errors++
		} else {
			warnings++
		}
	}
	return errors, warnings
}
