#!/usr/bin/env node
// taskclient.mjs - run one tool as a task with the official TypeScript SDK
// 1.x client's experimental tasks API.
//
// The Go end-to-end tests run this against the gateway, to check that an
// independently written client creates, follows, lists and reads tasks
// through it.
//
// Usage:
//   node taskclient.mjs --stdio <command> [args...]
//   node taskclient.mjs --http <url>
//
// Reads {"tool": "...", "arguments": {...}} from stdin. Lists the tools (the
// SDK learns which ones run as tasks), calls the tool with callToolStream,
// then lists the tasks and gets the created one. Writes one JSON object:
//   {"capabilities": {...}, "messages": [{"type": "taskCreated"|"taskStatus"|
//    "result"|"error", "task"?: {...}, "result"?: {...}, "error"?: "..."}...],
//    "listed": [...tasks/list...], "got": {...tasks/get of the created task...}}
// or {"fatal": "message"} with exit code 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function fatal(message) {
  process.stdout.write(JSON.stringify({ fatal: message }) + "\n");
  process.exit(1);
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const argv = process.argv.slice(2);
if (!["--stdio", "--http"].includes(argv[0]) || argv.length < 2 || (argv[0] === "--http" && argv.length !== 2)) {
  fatal("usage: node taskclient.mjs --stdio <command> [args...] | --http <url>");
}

let spec;
try {
  spec = JSON.parse(await readStdin());
} catch (err) {
  fatal(`stdin is not JSON: ${err.message}`);
}

const client = new Client({ name: "mcp-aggregator-taskclient", version: "1.0.0" }, { capabilities: {} });
const transport =
  argv[0] === "--stdio"
    ? new StdioClientTransport({ command: argv[1], args: argv.slice(2), stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(argv[1]));
try {
  await client.connect(transport);
} catch (err) {
  fatal(`connect: ${err.message}`);
}

const out = { capabilities: client.getServerCapabilities(), messages: [] };
try {
  await client.listTools();
  let created;
  const stream = client.experimental.tasks.callToolStream(
    { name: spec.tool, arguments: spec.arguments ?? {} },
    undefined,
    { timeout: 60_000 },
  );
  for await (const message of stream) {
    const entry = { type: message.type };
    if (message.task) entry.task = message.task;
    if (message.result) entry.result = message.result;
    if (message.error) entry.error = String(message.error.message ?? message.error);
    if (message.type === "taskCreated") created = message.task.taskId;
    out.messages.push(entry);
  }
  out.listed = (await client.experimental.tasks.listTasks()).tasks;
  if (created) out.got = await client.experimental.tasks.getTask(created);
} catch (err) {
  out.fatalStep = String(err.message ?? err);
}
if (transport instanceof StreamableHTTPClientTransport) {
  await transport.terminateSession().catch(() => {});
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
