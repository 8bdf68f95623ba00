#!/usr/bin/env node
// taskserver.mjs - a stdio MCP server whose tools run as tasks (protocol
// 2025-11-25, the TypeScript SDK 1.x experimental tasks API).
//
// The Go end-to-end tests put two of these behind the gateway. Task ids are
// numbered per process ("task-1", "task-2", ...), so two servers hand out
// the same ids, which the gateway must keep apart.
//
// Usage:
//   node taskserver.mjs
//
// Capabilities: tools; tasks with list, cancel and task-augmented tools/call.
//
// Tools:
//   countdown {label: string, steps: int, stepMs: int}   (taskSupport: optional)
//       A task that moves through `steps` working states, stepMs apart, each
//       announced with notifications/tasks/status (statusMessage "step i of
//       n"), then completes with the text "<label> done after n steps".
//       A cancelled task stops at its next step. Called without a task, the
//       SDK runs it as a task and waits for its result.
//   fails {message: string}                             (taskSupport: required)
//       A task that fails at once: its result is a tool error with message.

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { InMemoryTaskStore, InMemoryTaskMessageQueue, isTerminal } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

// Ids numbered per process: the point of this server.
class NumberedTaskStore extends InMemoryTaskStore {
  constructor() {
    super();
    this.next = 0;
  }
  generateTaskId() {
    this.next += 1;
    return `task-${this.next}`;
  }
}

const taskStore = new NumberedTaskStore();
const server = new McpServer(
  { name: "mcp-aggregator-taskserver", version: "1.0.0" },
  {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore,
    taskMessageQueue: new InMemoryTaskMessageQueue(),
  },
);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function countdown(taskId, store, { label, steps, stepMs }) {
  for (let i = 1; i <= steps; i++) {
    await sleep(stepMs);
    const task = await store.getTask(taskId).catch(() => null);
    if (!task || isTerminal(task.status)) {
      return; // cancelled (or gone): stop here
    }
    await store.updateTaskStatus(taskId, "working", `step ${i} of ${steps}`);
  }
  const task = await store.getTask(taskId).catch(() => null);
  if (!task || isTerminal(task.status)) {
    return;
  }
  await store.storeTaskResult(taskId, "completed", {
    content: [{ type: "text", text: `${label} done after ${steps} steps` }],
  });
}

server.experimental.tasks.registerToolTask(
  "countdown",
  {
    description: "Counts down as a task: steps working states, stepMs apart, then a result naming label.",
    inputSchema: {
      label: z.string(),
      steps: z.number().int().min(0).max(1000).default(3),
      stepMs: z.number().int().min(0).max(60000).default(100),
    },
    execution: { taskSupport: "optional" },
  },
  {
    createTask: async (args, extra) => {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60000, pollInterval: 100 });
      countdown(task.taskId, extra.taskStore, args).catch((err) => {
        extra.taskStore.updateTaskStatus(task.taskId, "failed", String(err)).catch(() => {});
      });
      return { task };
    },
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  },
);

server.experimental.tasks.registerToolTask(
  "fails",
  {
    description: "A task that fails at once with message.",
    inputSchema: { message: z.string() },
    execution: { taskSupport: "required" },
  },
  {
    createTask: async ({ message }, extra) => {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60000, pollInterval: 100 });
      setImmediate(() => {
        extra.taskStore
          .storeTaskResult(task.taskId, "failed", { content: [{ type: "text", text: message }], isError: true })
          .catch(() => {});
      });
      return { task };
    },
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  },
);

await server.connect(new StdioServerTransport());
