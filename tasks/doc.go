// Package tasks keeps the task table: the task ids the aggregator gives its
// clients (protocol 2025-11-25 tasks), mapped to the upstream tasks behind
// them, with the session that owns each, its ttl, the caps (per session,
// per client, overall) and the indexes that find a task by either id. It
// also reads and rewrites the task ids in messages (taskId, a
// CreateTaskResult's task, related-task _meta), the task cursors of
// tasks/list, ttls and terminal statuses. Forwarding task requests and
// notifying sessions is the proxy's.
package tasks
