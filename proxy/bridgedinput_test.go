package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInputResponsesOfBounded(t *testing.T) {
	got, bad := inputResponsesOf(json.RawMessage(`{"taskId":"t","inputResponses":{"input-1":{"action":"accept"}}}`))
	require.Empty(t, bad)
	assert.JSONEq(t, `{"action":"accept"}`, string(got["input-1"]))

	many := make([]string, maxHeldInputs+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":{}`, i)
	}
	for params, want := range map[string]string{
		`{"taskId":"t"}`:                                                    "needs params.inputResponses",
		`{"taskId":"t","inputResponses":[]}`:                                "must be an object",
		`{"taskId":"t","inputResponses":null}`:                              "must be an object",
		`{"taskId":"t","inputResponses":{"input-1":1}}`:                     `inputResponses["input-1"] must be an object`,
		`{"taskId":"t","inputResponses":{` + strings.Join(many, ",") + `}}`: "has at most 16 held at once",
	} {
		_, bad := inputResponsesOf(json.RawMessage(params))
		assert.Contains(t, bad, want, params)
	}
}
