#!/usr/bin/env node
// sdkclient.mjs - drive an MCP server with the official TypeScript SDK client.
//
// The Go end-to-end tests run this as a subprocess to check that the gateway
// is usable from a real, independently written MCP client.
//
// Usage:
//   node sdkclient.mjs --stdio <command> [args...]
//   node sdkclient.mjs --http <url> [--header "Name: value"]...
//
// A JSON array of steps is read from stdin and executed in order. Exactly one
// JSON object is written to stdout: {"results": [...one entry per step...]}.
// On a failure outside of a step (bad usage, bad script, connect failure)
// {"fatal": "message"} is written instead and the exit code is 1.
//
// Steps:
//   {"op": "serverInfo"}
//       -> {"serverVersion": {...}, "capabilities": {...}, "instructions": "..."}
//   {"op": "listTools", "atLeast": n, "waitMs": n}
//       -> {"tools": [...all pages concatenated...], "pages": n}
//          with atLeast: while fewer tools are listed, waits (up to waitMs in all)
//          for the next notifications/tools/list_changed and lists again
//   {"op": "callTool", "name": "...", "arguments": {...}, "progress": bool, "timeoutMs": n}
//       -> {"result": {...}} or, with "progress": true, {"result": {...}, "progress": [...]}
//          where progress holds the raw notifications/progress params received for
//          this request (progressToken included), in arrival order
//       -> {"error": {"code": n, "message": "...", "data": ...}} if the request failed
//          (a result with isError: true is a result, not an error)
//   {"op": "callToolCancel", "name": "...", "arguments": {...}, "afterProgress": n}
//       -> {"cancelled": true, "progress": [...]}  after n progress notifications
//          the request is aborted (the SDK sends notifications/cancelled).
//          If the call settles first: {"cancelled": false, "result"|"error": ..., "progress": [...]}
//   {"op": "waitListChanged", "timeoutMs": 5000, "fresh": false}
//       -> {"listChanged": true|false, "count": n}  resolves once more
//          notifications/tools/list_changed have arrived (since connect) than earlier
//          waitListChanged steps consumed. With "fresh": true, notifications that
//          arrived before this step are ignored.
//   {"op": "notifications"}
//       -> {"notifications": [{"method": "...", "params": {...}}, ...]} every server
//          notification received since connect, as sent (progress included).
//   {"op": "sleep", "ms": n}
//       -> {"slept": n}
//   {"op": "request", "method": "...", "params": {...}}
//       -> {"result": {...}} or {"error": {...}}: any request, its result as received
//
// Results are passed through exactly as received: requests are sent with a
// schema that accepts anything, so the SDK's own result validation cannot drop
// or reject fields (unknown content types, structuredContent, _meta, ...).
//
// For --stdio the child inherits this process's full environment and stderr.
// For --http the session is terminated (HTTP DELETE) before exiting.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { errorEntry, exitWith, openTransport, parseArgs, readScript, runSteps, tapTransport, Waiters } from "./stepclient.mjs";

const DEFAULT_TIMEOUT_MS = 60_000;
const STEP_OPS = ["serverInfo", "listTools", "callTool", "callToolCancel", "waitListChanged", "notifications", "sleep", "request"];

// A result "schema" that accepts any value unchanged. The SDK validates
// results with whatever object exposes safeParse (Zod 3 style), so this keeps
// results byte-for-byte as decoded from the wire.
const RawResult = {
  safeParse: (data) => ({ success: true, data }),
  parse: (data) => data,
};

async function main() {
  const opts = parseArgs("sdkclient.mjs", process.argv.slice(2));
  const script = await readScript(STEP_OPS);

  const client = new Client({ name: "mcp-aggregator-sdkclient", version: "1.0.0" }, { capabilities: {} });

  const transport = openTransport(opts, { StdioClientTransport, StreamableHTTPClientTransport });

  // Server notifications are recorded straight off the wire, in arrival order.
  // (The SDK dispatches notification handlers asynchronously, so a progress
  // notification sent just before a response would otherwise be lost.)
  const notifications = [];
  const progressByToken = new Map();
  let lastToolsCallToken;
  let listChangedCount = 0;
  let listChangedConsumed = 0;
  const listChangedWaiters = new Waiters();
  tapTransport(
    transport,
    (msg) => {
      if (typeof msg?.method !== "string" || msg.id !== undefined) return;
      notifications.push(msg.params === undefined ? { method: msg.method } : { method: msg.method, params: msg.params });
      if (msg.method === "notifications/progress") {
        const token = msg.params?.progressToken;
        if (!progressByToken.has(token)) progressByToken.set(token, []);
        progressByToken.get(token).push(msg.params);
      } else if (msg.method === "notifications/tools/list_changed") {
        listChangedCount++;
        listChangedWaiters.wake();
      }
    },
    (msg) => {
      if (msg?.method === "tools/call" && msg.id !== undefined) {
        lastToolsCallToken = msg.params?._meta?.progressToken;
      }
    },
  );

  await client.connect(transport);

  const rawRequest = (method, params, options) => client.request({ method, params }, RawResult, options);

  // Sends tools/call and returns [resultPromise, progressList]. The request is
  // written to the transport synchronously, so its progress token is known
  // right after client.request() returns.
  const startToolCall = (step, options) => {
    lastToolsCallToken = undefined;
    const promise = rawRequest("tools/call", { name: step.name, arguments: step.arguments ?? {} }, options);
    const token = lastToolsCallToken;
    const progress = () => (token === undefined ? [] : [...(progressByToken.get(token) ?? [])]);
    return [promise, progress];
  };

  const steps = {
    async serverInfo() {
      return {
        serverVersion: client.getServerVersion() ?? null,
        capabilities: client.getServerCapabilities() ?? null,
        instructions: client.getInstructions() ?? null,
      };
    },

    async listTools(step) {
      const deadline = Date.now() + (step.waitMs ?? 0);
      for (;;) {
        const seen = listChangedCount;
        const tools = [];
        let cursor;
        let pages = 0;
        do {
          const res = await rawRequest("tools/list", cursor === undefined ? {} : { cursor }, {
            timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS,
          });
          pages++;
          tools.push(...(res.tools ?? []));
          cursor = res.nextCursor;
        } while (cursor !== undefined && cursor !== null);
        if (!step.atLeast || tools.length >= step.atLeast) return { tools, pages };
        if (!(await listChangedWaiters.waitUntil(() => listChangedCount > seen, deadline))) return { tools, pages };
      }
    },

    async callTool(step) {
      const options = { timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS };
      if (step.progress) {
        options.onprogress = () => {};
        options.resetTimeoutOnProgress = true;
      }
      const [promise, progress] = startToolCall(step, options);
      try {
        const result = await promise;
        return step.progress ? { result, progress: progress() } : { result };
      } catch (err) {
        return step.progress ? { ...errorEntry(err), progress: progress() } : errorEntry(err);
      }
    },

    async callToolCancel(step) {
      const afterProgress = step.afterProgress ?? 1;
      const controller = new AbortController();
      let seen = 0;
      const options = {
        timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        resetTimeoutOnProgress: true,
        signal: controller.signal,
        onprogress: () => {
          if (++seen >= afterProgress && !controller.signal.aborted) {
            controller.abort("cancelled by sdkclient");
          }
        },
      };
      const [promise, progress] = startToolCall(step, options);
      try {
        const result = await promise;
        return { cancelled: false, result, progress: progress() };
      } catch (err) {
        if (controller.signal.aborted) return { cancelled: true, progress: progress() };
        return { cancelled: false, ...errorEntry(err), progress: progress() };
      }
    },

    async waitListChanged(step) {
      if (step.fresh) listChangedConsumed = listChangedCount;
      const timeoutMs = step.timeoutMs ?? 5000;
      const deadline = Date.now() + timeoutMs;
      if (!(await listChangedWaiters.waitUntil(() => listChangedCount > listChangedConsumed, deadline))) {
        return { listChanged: false, count: listChangedCount };
      }
      listChangedConsumed = listChangedCount;
      return { listChanged: true, count: listChangedCount };
    },

    async notifications() {
      return { notifications: [...notifications] };
    },

    async request(step) {
      try {
        return { result: await rawRequest(step.method, step.params ?? {}, { timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS }) };
      } catch (err) {
        return errorEntry(err);
      }
    },

    async sleep(step) {
      const ms = step.ms ?? 0;
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { slept: ms };
    },
  };

  const results = await runSteps(script, steps);

  if (transport instanceof StreamableHTTPClientTransport) {
    try {
      await transport.terminateSession();
    } catch {
      // Best effort: the server may not support explicit session termination.
    }
  }
  await client.close();
  return { results };
}

exitWith(main);
