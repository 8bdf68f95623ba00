package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// A 2025-11-25 Task becomes the extension's: resultType set, ttl as ttlMs,
// pollInterval as pollIntervalMs, everything else as it was.
func TestExtensionTaskShape(t *testing.T) {
	created := json.RawMessage(`{"task":{"taskId":"task-ab","status":"working","ttl":60000,"pollInterval":50,"createdAt":"2026-01-01T00:00:00Z","x":{"y":[1]}},"_meta":{"k":1}}`)
	assert.JSONEq(t, `{"resultType":"task","taskId":"task-ab","status":"working","ttlMs":60000,"pollIntervalMs":50,"createdAt":"2026-01-01T00:00:00Z","x":{"y":[1]}}`,
		string(extensionHandle(created)))
	assert.JSONEq(t, `{"resultType":"complete","taskId":"t","status":"completed","ttlMs":null}`,
		string(extensionTask(json.RawMessage(`{"taskId":"t","status":"completed","ttl":null,"resultType":"x"}`), "complete")))
}

// Only a sessionless request that declares the extension may be answered
// with a task handle.
func TestDeclaresTasksExtension(t *testing.T) {
	caps := json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	assert.True(t, declaresTasksExtension(&downstream.Request{Protocol: "2026-07-28", ClientCapabilities: caps}))
	assert.False(t, declaresTasksExtension(&downstream.Request{Protocol: "2025-11-25", ClientCapabilities: caps}), "a session has the core tasks")
	assert.False(t, declaresTasksExtension(&downstream.Request{Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":null}}`)}))
	assert.False(t, declaresTasksExtension(&downstream.Request{Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{}`)}))
	assert.False(t, declaresTasksExtension(nil))
	assert.True(t, isTaskHandle(json.RawMessage(`{"resultType":"task","taskId":"x"}`)))
	assert.False(t, isTaskHandle(json.RawMessage(`{"resultType":"complete","task":{"taskId":"x"}}`)))
}

// The extension's requests find no task of another client, nor of another
// conversation; tasks/update is the extension's alone.
func TestExtensionTaskRequestsNotFound(t *testing.T) {
	p := newTestProxy(t)
	ask := func(method, protocol string) *jsonrpc.Message {
		t.Helper()
		msg := &jsonrpc.Message{ID: json.RawMessage(`1`), Method: method, Params: json.RawMessage(`{"taskId":"task-00000000000000000000000000000000"}`)}
		var s downstream.Session
		if protocol != "2026-07-28" {
			s = fakeSession("s1")
		}
		return p.Handle(context.Background(), &downstream.Request{Msg: msg, Protocol: protocol, Session: s, Send: func(*jsonrpc.Message) bool { return true }})
	}
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		resp := ask(method, "2026-07-28")
		require.NotNil(t, resp.Error, method)
		assert.Equal(t, jsonrpc.CodeInvalidParams, resp.Error.Code, method)
		assert.Contains(t, resp.Error.Message, "not found", method)
	}
	resp := ask("tasks/update", "2025-11-25")
	require.NotNil(t, resp.Error)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, resp.Error.Code, "a session's tasks have no tasks/update")
}
