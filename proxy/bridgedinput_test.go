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

func TestTaskShapesBetweenGenerations(t *testing.T) {
	legacy := `{"taskId":"t1","status":"working","ttl":60000,"pollInterval":100,"createdAt":"x"}`
	ext := extensionTask(json.RawMessage(legacy), "complete")
	assert.JSONEq(t, `{"resultType":"complete","taskId":"t1","status":"working","ttlMs":60000,"pollIntervalMs":100,"createdAt":"x"}`, string(ext))
	note := extensionTask(json.RawMessage(legacy), "")
	assert.JSONEq(t, `{"taskId":"t1","status":"working","ttlMs":60000,"pollIntervalMs":100,"createdAt":"x"}`, string(note))

	back := legacyTask(json.RawMessage(`{"resultType":"complete","taskId":"t1","status":"completed","ttlMs":60000,"pollIntervalMs":100,"result":{"content":[]},"inputRequests":{},"_meta":{"k":1}}`))
	assert.JSONEq(t, `{"taskId":"t1","status":"completed","ttl":60000,"pollInterval":100}`, string(back))

	related := withRelatedTask(json.RawMessage(`{"content":[],"_meta":{"keep":true}}`), "task-9")
	assert.JSONEq(t, `{"content":[],"_meta":{"keep":true,"io.modelcontextprotocol/related-task":{"taskId":"task-9"}}}`, string(related))
}
