package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestTaskErrorsNameTheClientsID: an upstream's error about a task says the
// client's id of it, in its message and its data, never the upstream's.
func TestTaskErrorsNameTheClientsID(t *testing.T) {
	e := &taskEntry{id: "task-0123abcd", upstreamID: "48af24dad088da83"}
	in := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Task 48af24dad088da83 has no result stored",
		Data: json.RawMessage(`{"taskId":"48af24dad088da83"}`)}
	out := taskIDsToClient(in, e)
	assert.Equal(t, "Task task-0123abcd has no result stored", out.Message)
	assert.JSONEq(t, `{"taskId":"task-0123abcd"}`, string(out.Data))
	assert.Equal(t, in.Code, out.Code)
	assert.Equal(t, "Task 48af24dad088da83 has no result stored", in.Message, "the upstream's error is not changed in place")
}
