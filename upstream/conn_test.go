package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRPCErrorText(t *testing.T) {
	err := &RPCError{Code: -32042, Message: "nope", Data: json.RawMessage(`{"a":1}`)}
	assert.Equal(t, "JSON-RPC error -32042: nope", err.Error())
}
