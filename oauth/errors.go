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
}

func (e *LoginRequiredError) Error() string {
	return fmt.Sprintf("%s; run `mcp-aggregator login %s`", e.Reason, e.Server)
}

// Is makes errors.Is(err, ErrLoginRequired) hold.
func (e *LoginRequiredError) Is(target error) bool { return target == ErrLoginRequired }
