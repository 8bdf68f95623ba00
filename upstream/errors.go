package upstream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"

	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

// Transient reports whether a failure to start an upstream may go away if
// tried again (a refused connection, a process that died early) rather than
// being permanent (no such command, a protocol error, the time budget spent).
func Transient(err error) bool {
	var rpcErr *RPCError
	var execErr *exec.Error
	var violation *protocolError
	switch {
	case err == nil:
		return false
	case errors.As(err, &violation):
		return false // the server answers as it did; asking again changes nothing
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &rpcErr), errors.As(err, &execErr), errors.Is(err, oauth.ErrLoginRequired):
		return false
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOTDIR):
		return false // a cwd or command that is not there, or no directory
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	msg := err.Error()
	for _, permanent := range []string{"401", "403", "404", "not supported", "is this an MCP server"} {
		if strings.Contains(msg, permanent) {
			return false
		}
	}
	return true
}

// protocolError is an answer of the upstream that breaks the MCP protocol
// in a way the aggregator cannot work around: the same server gives the same
// answer when asked again.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// violation returns a protocolError with a formatted message.
func violation(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}
