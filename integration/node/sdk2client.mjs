#!/usr/bin/env node
// sdk2client.mjs - drive an MCP server with the official TypeScript SDK v2 client
// (@modelcontextprotocol/client) in its protocol 2026-07-28 mode.
//
// The Go end-to-end tests run this as a subprocess to check that the gateway serves the
// sessionless protocol generation to a real, independently written client: server/discover
// instead of initialize, the per-request _meta envelope, the Mcp-Method / Mcp-Name headers
// over HTTP, the SDK's own validation of every 2026-07-28 result (resultType; ttlMs and
// cacheScope on tools/list), and tools/list_changed delivered on a subscriptions/listen
// stream.
//
// The client pins the version (versionNegotiation: {mode: {pin: "2026-07-28"}}), so it
// never falls back to initialize: a server that cannot speak 2026-07-28 fails connect.
// On stdio the SDK runs its server/discover probe on a short-lived sibling process started
// from the same command (its stderr discarded), then starts the session's own process.
//
// Usage:
//   node sdk2client.mjs --stdio <command> [args...]
//   node sdk2client.mjs --http <url> [--header "Name: value"]...
//
// A JSON array of steps is read from stdin and executed in order, then the client is
// closed. Exactly one JSON object is written to stdout:
// {"results": [...one entry per step...], "closeMs": n}, where closeMs is how long
// client.close() took (on stdio it closes the child's stdin, waits up to 2 s for the
// child to exit, then sends SIGTERM).
// On a failure outside of a step (bad usage, bad script, connect failure)
// {"fatal": "message"} is written instead and the exit code is 1.
//
// Steps:
//   {"op": "serverInfo"}
//       -> {"protocolVersion": "...", "era": "modern"|"legacy", "serverVersion": {...},
//           "capabilities": {...}, "instructions": ..., "subscription": {...honored filter...}|null}
//   {"op": "listTools"}
//       -> {"tools": [...as client.listTools() returned them...],
//           "wire": [...every tools/list result of the call, exactly as received...]}
//   {"op": "callTool", "name": "...", "arguments": {...}, "timeoutMs": n}
//       -> {"result": {...as client.callTool() returned it...}, "wire": {...the result as received...}}
//       -> {"error": {"code": n, "message": "...", "data": ...}} if the SDK threw
//          (a result with isError: true is a result, not an error)
//   {"op": "mark", "text": "..."}
//       -> {"marked": "...", "notifications": n, "listChanged": n}, after writing the line
//          "sdk2client: mark <text>" to stderr, so that a test can act (edit a config) at
//          this point of the script; the counts are the notifications received and the
//          onChanged callbacks fired so far
//   {"op": "waitListChanged", "timeoutMs": 5000, "fresh": false, "includes": "tool"}
//       -> {"listChanged": true, "count": n, "tools": [...names...]} once the SDK's
//          listChanged.tools.onChanged callback has fired more often (since connect) than
//          earlier waitListChanged steps consumed; "tools" is the tool list the SDK fetched
//          for that callback ("refreshError" instead when that fetch failed), and with
//          "includes" only a callback whose list has that tool counts. "count" is the
//          number of callbacks so far. {"listChanged": false, "count": n} on timeout.
//          With "fresh": true, callbacks that fired before this step are ignored.
//   {"op": "notifications"}
//       -> {"notifications": [{"method": "...", "params": {...}}, ...]} every server
//          notification received since connect, as sent (subscription acknowledgements
//          included).
//
// The listChanged handler runs with debounceMs: 0, so every tools/list_changed the SDK
// accepts fires the callback once.
//
// For --stdio the child inherits this process's full environment and stderr.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { errorEntry, exitWith, openTransport, parseArgs, readScript, runSteps, tapTransport, Waiters } from "./stepclient.mjs";

const PROTOCOL_VERSION = "2026-07-28";
const DEFAULT_TIMEOUT_MS = 60_000;
const STEP_OPS = ["serverInfo", "listTools", "callTool", "mark", "waitListChanged", "notifications"];

async function main() {
  const opts = parseArgs("sdk2client.mjs", process.argv.slice(2));
  const script = await readScript(STEP_OPS);

  // Each onChanged callback, in order: the tool names the SDK re-listed, or its error.
  const changes = [];
  let changesConsumed = 0;
  const changeWaiters = new Waiters();
  const client = new Client(
    { name: "mcp-aggregator-sdk2client", version: "1.0.0" },
    {
      versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
      listChanged: {
        tools: {
          debounceMs: 0,
          onChanged: (error, tools) => {
            changes.push(error ? { refreshError: error.message ?? String(error) } : { tools: (tools ?? []).map((t) => t.name) });
            changeWaiters.wake();
          },
        },
      },
    },
  );

  const transport = openTransport(opts, { StdioClientTransport, StreamableHTTPClientTransport });

  // Messages recorded straight off the wire, in arrival order.
  const notifications = [];
  const methodsByID = new Map(); // outgoing request id -> method
  const responses = []; // {method, result} | {method, error}
  tapTransport(
    transport,
    (msg) => {
      if (typeof msg.method === "string" && msg.id === undefined) {
        notifications.push(msg.params === undefined ? { method: msg.method } : { method: msg.method, params: msg.params });
      } else if (msg.method === undefined && msg.id !== undefined) {
        const method = methodsByID.get(msg.id);
        responses.push(msg.error === undefined ? { method, result: msg.result } : { method, error: msg.error });
      }
    },
    (msg) => {
      if (typeof msg?.method === "string" && msg.id !== undefined) methodsByID.set(msg.id, msg.method);
    },
  );

  await client.connect(transport);

  // wireResults returns the results of method that arrived since responses[from].
  const wireResults = (from, method) => responses.slice(from).filter((r) => r.method === method);

  const steps = {
    async serverInfo() {
      return {
        protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
        era: client.getProtocolEra() ?? null,
        serverVersion: client.getServerVersion() ?? null,
        capabilities: client.getServerCapabilities() ?? null,
        instructions: client.getInstructions() ?? null,
        subscription: client.autoOpenedSubscription?.honoredFilter ?? null,
      };
    },

    async listTools(step) {
      const from = responses.length;
      const res = await client.listTools(undefined, { timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS });
      return { tools: res.tools, wire: wireResults(from, "tools/list").map((r) => r.result ?? { error: r.error }) };
    },

    async callTool(step) {
      const from = responses.length;
      try {
        const result = await client.callTool(
          { name: step.name, arguments: step.arguments ?? {} },
          { timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS },
        );
        const wire = wireResults(from, "tools/call");
        return { result, wire: wire.length > 0 ? wire[wire.length - 1].result ?? null : null };
      } catch (err) {
        return errorEntry(err);
      }
    },

    async mark(step) {
      const text = String(step.text ?? "");
      await new Promise((resolve) => process.stderr.write(`sdk2client: mark ${text}\n`, resolve));
      return { marked: text, notifications: notifications.length, listChanged: changes.length };
    },

    async waitListChanged(step) {
      if (step.fresh) changesConsumed = changes.length;
      const timeoutMs = step.timeoutMs ?? 5000;
      const deadline = Date.now() + timeoutMs;
      // The callback that ends the wait: the first unconsumed one, or with "includes" the
      // first whose refreshed list has that tool.
      const found = () => {
        for (let i = changesConsumed; i < changes.length; i++) {
          if (step.includes === undefined || changes[i].tools?.includes(step.includes)) return i;
        }
        return -1;
      };
      if (!(await changeWaiters.waitUntil(() => found() >= 0, deadline))) {
        return { listChanged: false, count: changes.length };
      }
      const i = found();
      changesConsumed = i + 1;
      return { listChanged: true, count: changes.length, ...changes[i] };
    },

    async notifications() {
      return { notifications: [...notifications] };
    },
  };

  const results = await runSteps(script, steps);

  // How long the SDK's own close took: on stdio it closes the child's stdin, waits up to
  // 2 s for the child to exit, then sends SIGTERM.
  const closing = Date.now();
  await client.close();
  return { results, closeMs: Date.now() - closing };
}

exitWith(main);
