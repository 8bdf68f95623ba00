#!/usr/bin/env node
// taskserver.mjs - an MCP server whose tools run as tasks (protocol
// 2025-11-25, the TypeScript SDK 1.x experimental tasks API).
//
// The Go end-to-end tests put two of these behind the gateway. Task ids are
// numbered per process (per session over HTTP: "task-1", "task-2", ...), so
// two servers hand out the same ids, which the gateway must keep apart.
//
// Usage:
//   node taskserver.mjs            serve one client on stdio
//   node taskserver.mjs --http     serve streamable HTTP on 127.0.0.1:$PORT,
//                                  a server (and task store) per session;
//                                  prints "listening on 127.0.0.1:PORT"
//
// Capabilities: tools, logging; tasks with list, cancel and task-augmented
// tools/call.
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
//   eager {label: string, stepMs: int}                  (taskSupport: required)
//       Announces its task (notifications/tasks/status, statusMessage
//       "accepted") before it answers the call with the CreateTaskResult,
//       then completes stepMs later with the text "<label> done".
//   reporter {label: string, steps: int, stepMs: int, ask: bool, early: bool}
//                                                       (taskSupport: required)
//       After answering the call, sends for each of `steps` steps, stepMs
//       apart, a notifications/progress with the call's progress token (when
//       it had one) and a notifications/message, both naming the task in
//       _meta["io.modelcontextprotocol/related-task"] on odd steps, and
//       with no _meta at all on even ones. With early, it sends one of each
//       (progress 0, naming the task) before it answers the call, so that
//       they precede the CreateTaskResult. With ask, it then sends
//       elicitation/create naming the task the same way. The result's
//       structuredContent is {sent: [params of every notification, as
//       sent], answer: {action, relatedTaskId}} (relatedTaskId: the task
//       the client's answer named in its _meta, or null); its text is
//       "<label> reported n steps".
//   ticker {steps: int}                                 (not a task)
//       An ordinary tool: sends `steps` notifications/progress with the
//       call's progress token on the call's own stream (no _meta), then
//       answers with structuredContent {sent: [their params, as sent]}.

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ElicitResultSchema, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { InMemoryTaskStore, InMemoryTaskMessageQueue, isTerminal } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

const RELATED_TASK = "io.modelcontextprotocol/related-task";

// Ids numbered per store: the point of this server.
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

// reporter's work, after the CreateTaskResult went out.
// reporterSend sends a notification of reporter's and records its params
// in sent.
async function reporterSend(server, sent, method, params) {
  sent.push(params);
  await server.server.notification({ method, params });
}

// reporterStep sends step i's progress (with a token) and log message;
// meta, when set, is their _meta.
async function reporterStep(server, sent, token, label, i, steps, meta) {
  const withMeta = (params) => (meta ? { ...params, _meta: meta } : params);
  if (token !== undefined) {
    await reporterSend(server, sent, "notifications/progress", withMeta({ progressToken: token, progress: i, total: steps, message: `step ${i} of ${steps}` }));
  }
  await reporterSend(server, sent, "notifications/message", withMeta({ level: "info", logger: "reporter", data: `${label}: step ${i} of ${steps}` }));
}

async function report(server, taskId, store, token, sent, { label, steps, stepMs, ask }) {
  const related = { [RELATED_TASK]: { taskId } };
  for (let i = 1; i <= steps; i++) {
    await sleep(stepMs);
    await reporterStep(server, sent, token, label, i, steps, i % 2 === 1 ? related : undefined);
  }
  let answer = null;
  if (ask) {
    const res = await server.server.request(
      {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: `Keep the report of ${label}?`,
          requestedSchema: { type: "object", properties: { keep: { type: "boolean" } } },
          _meta: related,
        },
      },
      ElicitResultSchema,
    );
    answer = { action: res.action, relatedTaskId: res._meta?.[RELATED_TASK]?.taskId ?? null };
  }
  await store.storeTaskResult(taskId, "completed", {
    content: [{ type: "text", text: `${label} reported ${steps} steps` }],
    structuredContent: { sent, answer },
  });
}

function makeServer() {
  const server = new McpServer(
    { name: "mcp-aggregator-taskserver", version: "1.0.0" },
    {
      capabilities: {
        tools: {},
        logging: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      taskStore: new NumberedTaskStore(),
      taskMessageQueue: new InMemoryTaskMessageQueue(),
    },
  );
  const handlers = {
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  };
  const newTask = (extra) => extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60000, pollInterval: 100 });
  const failed = (extra, taskId) => (err) => {
    extra.taskStore.updateTaskStatus(taskId, "failed", String(err)).catch(() => {});
  };

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
        const task = await newTask(extra);
        countdown(task.taskId, extra.taskStore, args).catch(failed(extra, task.taskId));
        return { task };
      },
      ...handlers,
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
        const task = await newTask(extra);
        setImmediate(() => {
          extra.taskStore
            .storeTaskResult(task.taskId, "failed", { content: [{ type: "text", text: message }], isError: true })
            .catch(() => {});
        });
        return { task };
      },
      ...handlers,
    },
  );

  server.experimental.tasks.registerToolTask(
    "eager",
    {
      description: "Announces its task before answering the call, then completes stepMs later.",
      inputSchema: { label: z.string(), stepMs: z.number().int().min(0).max(60000).default(100) },
      execution: { taskSupport: "required" },
    },
    {
      createTask: async ({ label, stepMs }, extra) => {
        const task = await newTask(extra);
        // The status notification goes out before the CreateTaskResult.
        await extra.taskStore.updateTaskStatus(task.taskId, "working", "accepted");
        sleep(stepMs)
          .then(() => extra.taskStore.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text: `${label} done` }] }))
          .catch(failed(extra, task.taskId));
        return { task: await extra.taskStore.getTask(task.taskId) };
      },
      ...handlers,
    },
  );

  server.experimental.tasks.registerToolTask(
    "reporter",
    {
      description: "Reports progress and log messages about its task after answering the call; may ask the client.",
      inputSchema: {
        label: z.string(),
        steps: z.number().int().min(0).max(100).default(3),
        stepMs: z.number().int().min(0).max(60000).default(50),
        ask: z.boolean().default(false),
        early: z.boolean().default(false),
      },
      execution: { taskSupport: "required" },
    },
    {
      createTask: async (args, extra) => {
        const task = await newTask(extra);
        const token = extra._meta?.progressToken;
        const sent = [];
        if (args.early) {
          await reporterStep(server, sent, token, args.label, 0, args.steps, { [RELATED_TASK]: { taskId: task.taskId } });
        }
        report(server, task.taskId, extra.taskStore, token, sent, args).catch(failed(extra, task.taskId));
        return { task };
      },
      ...handlers,
    },
  );
  server.registerTool(
    "ticker",
    {
      description: "Reports steps progress notifications, then answers with what it sent.",
      inputSchema: { steps: z.number().int().min(0).max(100).default(3) },
    },
    async ({ steps }, extra) => {
      const token = extra._meta?.progressToken;
      const sent = [];
      for (let i = 1; token !== undefined && i <= steps; i++) {
        const params = { progressToken: token, progress: i, total: steps };
        sent.push(params);
        await extra.sendNotification({ method: "notifications/progress", params });
      }
      return { content: [{ type: "text", text: `ticked ${sent.length} times` }], structuredContent: { sent } };
    },
  );
  return server;
}

if (process.argv[2] === "--http") {
  const port = Number(process.env.PORT);
  if (!Number.isInteger(port) || port <= 0) {
    process.stderr.write("taskserver: --http needs PORT\n");
    process.exit(2);
  }
  const transports = new Map();
  const http = createServer(async (req, res) => {
    try {
      const id = req.headers["mcp-session-id"];
      let transport = id ? transports.get(id) : undefined;
      if (!transport) {
        let body;
        if (req.method === "POST") {
          const chunks = [];
          for await (const chunk of req) chunks.push(chunk);
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        }
        if (id || !isInitializeRequest(body)) {
          res.writeHead(id ? 404 : 400, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: id ? "unknown session" : "initialize first" } }));
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => transports.set(sid, transport),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await makeServer().connect(transport);
        await transport.handleRequest(req, res, body);
        return;
      }
      await transport.handleRequest(req, res);
    } catch (err) {
      if (!res.headersSent) {
        res.writeHead(500, { "Content-Type": "text/plain" });
      }
      res.end(String(err));
    }
  });
  http.listen(port, "127.0.0.1", () => process.stdout.write(`listening on 127.0.0.1:${port}\n`));
} else {
  await makeServer().connect(new StdioServerTransport());
}
