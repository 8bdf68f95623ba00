package proxy

import (
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// relatedTaskKey is the _meta key that ties a message to a task.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// Where task ids sit in the messages the aggregator maps: a Task object
// (tasks/get, tasks/cancel, a tasks/list item, notifications/tasks/status),
// a CreateTaskResult, and the related-task _meta of any message.
var (
	taskIDPath        = []string{"taskId"}
	createdTaskIDPath = []string{"task", "taskId"}
	relatedTaskIDPath = []string{"_meta", relatedTaskKey, "taskId"}
)

// stringAt reads the string at path (member names, from the top) in obj.
func stringAt(obj []byte, path []string) (string, bool) {
	for _, name := range path {
		if obj = rawjson.Member(obj, name); obj == nil {
			return "", false
		}
	}
	return rawjson.String(obj)
}

// mapStringAt returns obj with the string at path replaced by to(old),
// every other byte kept. Every member of a name on the path is followed, as
// a repeated name may be read as either. It reports false, and returns obj,
// when obj is not a valid JSON object, nothing on the path is a string, or
// to declines every one.
func mapStringAt(obj []byte, path []string, to func(old string) (string, bool)) ([]byte, bool) {
	return rawjson.Replace(obj, path[0], func(value []byte) ([]byte, bool) {
		if len(path) > 1 {
			return mapStringAt(value, path[1:], to)
		}
		old, ok := rawjson.String(value)
		if !ok {
			return nil, false
		}
		next, ok := to(old)
		if !ok {
			return nil, false
		}
		return rawjson.AppendString(nil, next), true
	})
}

// setString returns a to that answers s whatever it is given.
func setString(s string) func(string) (string, bool) {
	return func(string) (string, bool) { return s, true }
}
