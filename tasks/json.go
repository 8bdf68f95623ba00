package tasks

import (
	"strconv"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// RelatedTaskKey is the _meta key that ties a message to a task.
const RelatedTaskKey = "io.modelcontextprotocol/related-task"

// Where task ids sit in the messages the aggregator maps: a Task object
// (tasks/get, tasks/cancel, a tasks/list item, notifications/tasks/status),
// a CreateTaskResult, and the related-task _meta of any message.
var (
	IDPath        = []string{"taskId"}
	CreatedIDPath = []string{"task", "taskId"}
	RelatedIDPath = []string{"_meta", RelatedTaskKey, "taskId"}
)

// StringAt reads the string at path (member names, from the top) in obj.
func StringAt(obj []byte, path []string) (string, bool) {
	for _, name := range path {
		if obj = rawjson.Member(obj, name); obj == nil {
			return "", false
		}
	}
	return rawjson.String(obj)
}

// MapStringAt returns obj with the string at path replaced by to(old),
// every other byte kept. Every member of a name on the path is followed, as
// a repeated name may be read as either. It reports false, and returns obj,
// when obj is not a valid JSON object, nothing on the path is a string, or
// to declines every one.
func MapStringAt(obj []byte, path []string, to func(old string) (string, bool)) ([]byte, bool) {
	return rawjson.Replace(obj, path[0], func(value []byte) ([]byte, bool) {
		if len(path) > 1 {
			return MapStringAt(value, path[1:], to)
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

// SetString returns a to that answers s whatever it is given.
func SetString(s string) func(string) (string, bool) {
	return func(string) (string, bool) { return s, true }
}

// TTL reads a Task's ttl, in milliseconds; ok is false when there is
// none or it is null (unlimited).
func TTL(task []byte) (time.Duration, bool) { return ttlAt(task, "ttl") }

// TTLMs reads the ttlMs of a Task of the 2026-07-28 tasks extension, as
// TTL does a 2025-11-25 Task's ttl.
func TTLMs(task []byte) (time.Duration, bool) { return ttlAt(task, "ttlMs") }

func ttlAt(task []byte, member string) (time.Duration, bool) {
	raw := rawjson.Member(task, member)
	if raw == nil {
		return 0, false
	}
	ms, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || ms <= 0 || ms > float64(taskMaxKeep/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// Terminal reports whether a Task object is in a terminal status.
func Terminal(task []byte) bool {
	status, _ := StringAt(task, []string{"status"})
	switch status {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}
