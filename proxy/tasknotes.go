package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// notifications/tasks of the tasks extension. A client's subscriptions/listen
// may name, in params.notifications.taskIds, tasks of its own (those its
// tasks/get would find: its principal's, of the conversation the request
// names when it names one); the acknowledgement grants those, and leaves out
// any other id, as tasks/get finds none. The status of a granted task, as
// its upstream tells it (a 2025-11-25 upstream's notifications/tasks/status
// of a bridged task, a 2026-07-28 upstream's notifications/tasks), goes on
// those streams alone, as the extension's Task under the aggregator's id.

// maxListenTasks bounds the task ids one listen stream may name.
const maxListenTasks = 1000

// grantedTasks is the part of ids, the taskIds a listen request names, that
// are tasks of the caller's: kept in order, each once.
func (p *Proxy) grantedTasks(req *downstream.Request, ids []string) []string {
	if len(ids) == 0 || !declaresTasksExtension(req) {
		return nil
	}
	meta := requestMeta(req.Msg.Params)
	if leaseNameError(req, meta[LeaseMetaKey]) != nil {
		return nil
	}
	key, _ := LeaseKeyOf(req, meta)
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		e, ok := p.tasks.Find(id, func(owner session.Key) bool {
			if owner.Client != key.Client || owner.Kind == session.KeySession {
				return false
			}
			return key.Kind != session.KeyNamed || owner == key
		})
		if ok && p.admits(req.Profile, e.Server) {
			out = append(out, id)
		}
	}
	return out
}

// taskNote sends task, the extension's Task of e (the aggregator's id in
// it), as notifications/tasks on the listen streams granted e.
func (c *clients) taskNote(e *tasks.Entry, task json.RawMessage) {
	c.mu.Lock()
	var targets []*listener
	for l := range c.listeners {
		for _, id := range l.filter.TaskIDs {
			if id == e.ID {
				targets = append(targets, l)
				break
			}
		}
	}
	c.mu.Unlock()
	for _, l := range targets {
		l.deliver(&jsonrpc.Message{Method: "notifications/tasks", Params: withSubscriptionID(task, l.id)})
	}
}

// bridgedTaskNote tells the listen streams granted e, a bridged task, of
// params, its upstream's notifications/tasks/status (the aggregator's id
// in it already).
func (p *Proxy) bridgedTaskNote(e *tasks.Entry, params json.RawMessage) {
	task := extensionTask(params, "")
	if held := p.heldInputRequests(e); held != nil && !tasks.Terminal(params) {
		task, _ = rawjson.Replace(task, "status", func([]byte) ([]byte, bool) { return []byte(`"input_required"`), true })
		task = rawjson.Add(task, "inputRequests", held)
	}
	p.clients.taskNote(e, task)
}

// extensionTaskNote takes a 2026-07-28 upstream's notifications/tasks: the
// status of one of its tasks, which goes, under the aggregator's id, to the
// listen streams granted it; one about a task the aggregator does not know
// (or not of the extension) is told no one.
func (p *Proxy) extensionTaskNote(inst *upstream.Instance, params json.RawMessage) {
	id, ok := tasks.StringAt(params, tasks.IDPath)
	if !ok {
		return
	}
	e, ok := p.tasks.ByUpstream(inst, id)
	if !ok {
		return
	}
	out, _ := tasks.MapStringAt(params, tasks.IDPath, tasks.SetString(e.ID))
	p.tasks.Touch(e, tasks.Terminal(params))
	if _, session := e.Owner.SessionID(); session {
		// A 2025-11-25 session's task, bridged: its owner hears
		// notifications/tasks/status.
		s := p.clients.session(e.Owner)
		if s == nil || !p.admits(p.sessionClient(s), e.Server) {
			return
		}
		s.Notify(&jsonrpc.Message{Method: "notifications/tasks/status", Params: p.relatedToClient(legacyTask(out), inst, e.Owner)})
		return
	}
	p.clients.taskNote(e, p.relatedToClient(out, inst, e.Owner))
}
