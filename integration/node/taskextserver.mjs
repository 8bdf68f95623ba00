#!/usr/bin/env node
// taskextserver.mjs - a protocol 2026-07-28 MCP server built on the TypeScript SDK v2
// (@modelcontextprotocol/server) that serves the tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663). The SDK 2.4.0 routes the extension's
// methods (it checks their Mcp-Name header against params.taskId) but keeps no tasks
// itself: this server keeps them, in memory, and registers tasks/get, tasks/update and
// tasks/cancel with schemas of its own.
//
// The Go end-to-end tests put it behind the gateway as a streamable-HTTP upstream
// pinned to 2026-07-28 and drive the gateway with raw 2026-07-28 requests.
//
// Usage: node taskextserver.mjs   (listens on 127.0.0.1, a free port; prints
//        "taskextserver: listening http://127.0.0.1:<port>/mcp" on stdout; every
//        tasks/* request it serves is logged on stderr as
//        "taskextserver: <method> <taskId>")
//
// Tools (one text item each):
//   greet {"text": "..."}  with the extension declared on the request: a task, at once
//                          input_required with inputRequests {name: elicitation/create};
//                          tasks/update with inputResponses.name (accepted content
//                          {name}) completes it with "<text>, <name>" (and, on that
//                          request's stream, notifications/tasks with the completed
//                          Task). Without the
//                          extension: "<text>, whoever you are" at once.
//   linger {}              a task (the extension required, else error -32021) that stays
//                          working until tasks/cancel, which cancels it.

import { randomUUID } from "node:crypto";
import { McpServer, createMcpHandler, ProtocolError } from "@modelcontextprotocol/server";
import { z } from "zod";
import { serveHTTP } from "./httpfront.mjs";

const EXT = "io.modelcontextprotocol/tasks";
const CAPS = "io.modelcontextprotocol/clientCapabilities";

// tasks are shared by every server instance the handler builds: a task outlives the
// request that created it.
const tasks = new Map();

function text(t) {
  return { content: [{ type: "text", text: t }] };
}

function declared(ctx) {
  const caps = ctx.mcpReq.envelope?.[CAPS] ?? ctx.mcpReq._meta?.[CAPS];
  return caps?.extensions?.[EXT] !== undefined;
}

function newTask(extra) {
  const now = new Date().toISOString();
  const task = { taskId: randomUUID(), status: "working", createdAt: now, lastUpdatedAt: now, ttlMs: 60000, pollIntervalMs: 50, ...extra };
  tasks.set(task.taskId, task);
  return task;
}

function update(task, changes) {
  Object.assign(task, changes, { lastUpdatedAt: new Date().toISOString() });
}

function find(taskId) {
  const task = tasks.get(taskId);
  if (!task) throw new ProtocolError(-32602, `task ${taskId} not found`);
  return task;
}

// handle is the CreateTaskResult of task: the Task itself, without the state tasks/get
// inlines. (The SDK validates a tools/call result as a CallToolResult, and adds the
// empty content that takes.)
function handle(task) {
  const { greetText, inputRequests, result, error, ...shown } = task;
  return { resultType: "task", ...shown };
}

function build() {
  const server = new McpServer(
    { name: "taskextserver", version: "1.0.0" },
    { capabilities: { tools: {}, extensions: { [EXT]: {} } } },
  );

  server.registerTool("greet", { description: "Greets, asking for a name in a task.", inputSchema: z.object({ text: z.string() }) }, async ({ text: t }, ctx) => {
    if (!declared(ctx)) return text(`${t}, whoever you are`);
    const task = newTask({
      status: "input_required",
      greetText: t,
      inputRequests: {
        name: { method: "elicitation/create", params: { message: "Whom to greet?", requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } } },
      },
    });
    return handle(task);
  });

  server.registerTool("linger", { description: "A task that runs until cancelled.", inputSchema: z.object({}) }, async (_args, ctx) => {
    if (!declared(ctx)) {
      throw new ProtocolError(-32021, "Missing required client capability", { requiredCapabilities: { extensions: { [EXT]: {} } } });
    }
    return handle(newTask({}));
  });

  const params = z.looseObject({ taskId: z.string() });
  server.server.setRequestHandler("tasks/get", { params }, async ({ taskId }) => {
    process.stderr.write(`taskextserver: tasks/get ${taskId}\n`);
    const { greetText, ...shown } = find(taskId);
    return shown;
  });
  // The SDK lifts inputResponses out of params into ctx.mcpReq.inputResponses.
  server.server.setRequestHandler("tasks/update", { params }, async ({ taskId }, ctx) => {
    process.stderr.write(`taskextserver: tasks/update ${taskId}\n`);
    const inputResponses = ctx.mcpReq.inputResponses;
    const task = find(taskId);
    const name = inputResponses?.name?.content?.name;
    if (task.status === "input_required" && inputResponses?.name?.action === "accept" && typeof name === "string") {
      const { inputRequests, ...rest } = task;
      tasks.set(taskId, rest);
      update(rest, { status: "completed", result: text(`${task.greetText}, ${name}`) });
      const { greetText, ...shown } = rest;
      await ctx.mcpReq.notify({ method: "notifications/tasks", params: shown });
    }
    return {};
  });
  server.server.setRequestHandler("tasks/cancel", { params }, async ({ taskId }) => {
    process.stderr.write(`taskextserver: tasks/cancel ${taskId}\n`);
    const task = find(taskId);
    if (task.status === "working" || task.status === "input_required") {
      delete task.inputRequests;
      update(task, { status: "cancelled" });
    }
    return {};
  });
  return server;
}

const onerror = (e) => process.stderr.write(`taskextserver: ${e?.message ?? e}\n`);
const handler = createMcpHandler(() => build(), { legacy: "reject", onerror });
serveHTTP("taskextserver", handler);
