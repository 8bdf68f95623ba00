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

const DEFAULT_TIMEOUT_MS = 60_000;
const STEP_OPS = ["serverInfo", "listTools", "callTool", "callToolCancel", "waitListChanged", "notifications", "sleep", "request"];

// A result "schema" that accepts any value unchanged. The SDK validates
// results with whatever object exposes safeParse (Zod 3 style), so this keeps
// results byte-for-byte as decoded from the wire.
const RawResult = {
  safeParse: (data) => ({ success: true, data }),
  parse: (data) => data,
};

function usage() {
  return "usage: sdkclient.mjs --stdio <command> [args...] | --http <url> [--header 'Name: value']...";
}

function parseArgs(argv) {
  const mode = argv[0];
  if (mode === "--stdio") {
    if (argv.length < 2) throw new Error(usage());
    return { mode: "stdio", command: argv[1], args: argv.slice(2) };
  }
  if (mode === "--http") {
    if (argv.length < 2) throw new Error(usage());
    const headers = {};
    for (let i = 2; i < argv.length; i++) {
      if (argv[i] !== "--header" || i + 1 >= argv.length) throw new Error(usage());
      const h = argv[++i];
      const colon = h.indexOf(":");
      if (colon <= 0) throw new Error(`bad header ${JSON.stringify(h)}`);
      headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
    }
    return { mode: "http", url: argv[1], headers };
  }
  throw new Error(usage());
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function errorEntry(err) {
  return {
    error: {
      code: typeof err?.code === "number" ? err.code : null,
      message: err?.message ?? String(err),
      data: err?.data ?? null,
    },
  };
}

// Observe every message crossing the transport without changing it: onIn sees
// each incoming message before the SDK does, onOut each outgoing one.
function tapTransport(transport, onIn, onOut) {
  let handler;
  const wrapped = (msg, extra) => {
    onIn(msg);
    return handler?.(msg, extra);
  };
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    enumerable: true,
    get: () => (handler ? wrapped : undefined),
    set: (h) => {
      handler = h;
    },
  });
  const send = transport.send.bind(transport);
  transport.send = (msg, options) => {
    onOut(msg);
    return send(msg, options);
  };
}

function writeAndExit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n", () => process.exit(code));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));

  const script = JSON.parse(await readStdin());
  if (!Array.isArray(script)) throw new Error("script must be a JSON array of steps");
  for (const step of script) {
    if (!STEP_OPS.includes(step?.op)) throw new Error(`unknown step op ${JSON.stringify(step?.op)}`);
  }

  const client = new Client({ name: "mcp-aggregator-sdkclient", version: "1.0.0" }, { capabilities: {} });

  let transport;
  if (opts.mode === "stdio") {
    transport = new StdioClientTransport({
      command: opts.command,
      args: opts.args,
      env: { ...process.env },
      stderr: "inherit",
    });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(opts.url), {
      requestInit: { headers: opts.headers },
    });
  }

  // Server notifications are recorded straight off the wire, in arrival order.
  // (The SDK dispatches notification handlers asynchronously, so a progress
  // notification sent just before a response would otherwise be lost.)
  const notifications = [];
  const progressByToken = new Map();
  let lastToolsCallToken;
  let listChangedCount = 0;
  let listChangedConsumed = 0;
  let listChangedWaiters = [];
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
        const waiters = listChangedWaiters;
        listChangedWaiters = [];
        for (const w of waiters) w();
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
        while (listChangedCount <= seen) {
          const left = deadline - Date.now();
          if (left <= 0) return { tools, pages };
          await new Promise((resolve) => {
            const timer = setTimeout(resolve, left);
            listChangedWaiters.push(() => {
              clearTimeout(timer);
              resolve();
            });
          });
        }
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
      while (listChangedCount <= listChangedConsumed) {
        const left = deadline - Date.now();
        if (left <= 0) return { listChanged: false, count: listChangedCount };
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, left);
          listChangedWaiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
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

  const results = [];
  for (const step of script) {
    try {
      results.push(await steps[step.op](step));
    } catch (err) {
      results.push(errorEntry(err));
    }
  }

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

main().then(
  (out) => writeAndExit(out, 0),
  (err) => writeAndExit({ fatal: err?.message ?? String(err) }, 1),
);
