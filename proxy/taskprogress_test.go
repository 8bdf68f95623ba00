package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTaskProgressHeldInOrder: a task-augmented call's progress that names
// the task before its CreateTaskResult was read is held; what comes after
// it, naming the task or not, waits behind it rather than overtaking it,
// and everything held is passed on in the order it came (here to the
// call's stream, the call having made no task).
func TestTaskProgressHeldInOrder(t *testing.T) {
	p := &Proxy{}
	var relayed []string
	tp := p.newTaskProgress(nil, func(params json.RawMessage) { relayed = append(relayed, string(params)) })

	before := `{"progressToken":"agg-1","progress":0}`
	named := `{"progressToken":"agg-1","progress":1,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-1"}}}`
	plain := `{"progressToken":"agg-1","progress":2}`
	tp.onProgress(json.RawMessage(before))
	assert.Equal(t, []string{before}, relayed, "progress that names no task, with none held, passes at once")
	tp.onProgress(json.RawMessage(named))
	tp.onProgress(json.RawMessage(plain))
	assert.Equal(t, []string{before}, relayed, "after one held, the next waits behind it")
	tp.drop()
	assert.Equal(t, []string{before, named, plain}, relayed, "passed on in the order they came")
}
