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
	return spliceMembers(obj, path[0], func(value []byte) ([]byte, bool) {
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

// spliceMembers returns obj with the value of each member called name
// replaced by replace(value), where replace reports true. The other bytes
// stay as they were. It reports whether anything was replaced; obj must be
// one valid JSON object, else it is returned as it is.
func spliceMembers(obj []byte, name string, replace func(value []byte) ([]byte, bool)) ([]byte, bool) {
	type span struct {
		start, end int
		with       []byte
	}
	var spans []span
	o := rawjson.NewObject(obj)
	for o.Next() {
		if string(o.Name()) != name {
			continue
		}
		v := o.Value()
		// Value is a subslice of obj: its offset follows from the capacities.
		start := cap(obj) - cap(v)
		if with, ok := replace(v); ok {
			spans = append(spans, span{start, start + len(v), with})
		}
	}
	if o.Err() != nil || len(spans) == 0 {
		return obj, false
	}
	out := make([]byte, 0, len(obj)+32)
	last := 0
	for _, s := range spans {
		out = append(out, obj[last:s.start]...)
		out = append(out, s.with...)
		last = s.end
	}
	return append(out, obj[last:]...), true
}

// setString returns a to that answers s whatever it is given.
func setString(s string) func(string) (string, bool) {
	return func(string) (string, bool) { return s, true }
}
