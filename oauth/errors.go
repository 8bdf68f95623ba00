package oauth

import (
	"errors"
	"fmt"
)

// ErrLoginRequired is what every LoginRequiredError matches with errors.Is.
var ErrLoginRequired = errors.New("login required")

// LoginRequiredError says a server cannot be used until someone runs
// `mcp-aggregator login SERVER`, and why.
type LoginRequiredError struct {
	Server string // the server's id in the config
	Reason string // e.g. "not logged in"
	// PerUser is set for a server where each caller logs in: they do so
	// through the link the gateway offers, not with the login command.
	PerUser bool
}

func (e *LoginRequiredError) Error() string {
	if e.PerUser {
		return fmt.Sprintf("server %q: %s; log in through the link the gateway offers (a client with URL-mode elicitation is sent it with the call)", e.Server, e.Reason)
	}
	return fmt.Sprintf("%s; run `mcp-aggregator login %s`", e.Reason, e.Server)
}

// Is makes errors.Is(err, ErrLoginRequired) hold.
func (e *LoginRequiredError) Is(target error) bool { return target == ErrLoginRequired }
