#!/usr/bin/env node
// sessionsclient.mjs - many sessions of the official TypeScript SDK client in
// one process, for the replica tests: each session connects once and calls
// tools in rounds; a failed call is recorded, never retried, and no session
// initializes again.
//
// Usage:
//   node sessionsclient.mjs <url>
//
// stdin carries commands, one JSON object a line; each is answered with one
// JSON line on stdout:
//   {"op": "open", "sessions": n}
//       -> {"ids": ["<Mcp-Session-Id>", ...]}  n sessions connected (initialize)
//   {"op": "round", "calls": [{"session": i, "name": "...", "arguments": {...}}, ...]}
//       -> {"results": [{"result": {...}} | {"error": {"status": n|null, "message": "..."}}, ...]}
//          the calls run at once, one result per call in order
//   {"op": "ids"}
//       -> {"ids": [...]}  each session's id now (it never changes)
//   {"op": "close"}
//       -> {"closed": n}  every session ended with DELETE; then the process exits

import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const RawResult = { safeParse: (data) => ({ success: true, data }), parse: (data) => data };

const url = process.argv[2];
if (!url) {
  process.stdout.write(JSON.stringify({ fatal: "usage: sessionsclient.mjs <url>" }) + "\n");
  process.exit(1);
}

const sessions = [];

function errorEntry(err) {
  const status = typeof err?.code === "number" && err.code >= 100 && err.code < 600 ? err.code : null;
  return { error: { status, message: err?.message ?? String(err) } };
}

async function open(n) {
  await Promise.all(
    Array.from({ length: n }, async () => {
      const transport = new StreamableHTTPClientTransport(new URL(url), {
        reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 50 },
      });
      const client = new Client({ name: "sessions-client", version: "1.0.0" }, { capabilities: {} });
      client.onerror = () => {}; // a GET stream cut by a killed replica reconnects
      await client.connect(transport);
      sessions.push({ client, transport });
    }),
  );
  return { ids: sessions.map((s) => s.transport.sessionId) };
}

async function round(calls) {
  const results = await Promise.all(
    calls.map(async (c) => {
      try {
        const result = await sessions[c.session].client.request(
          { method: "tools/call", params: { name: c.name, arguments: c.arguments ?? {} } },
          RawResult,
          { timeout: 60_000 },
        );
        return { result };
      } catch (err) {
        return errorEntry(err);
      }
    }),
  );
  return { results };
}

async function closeAll() {
  let n = 0;
  for (const s of sessions) {
    try {
      await s.transport.terminateSession();
      await s.client.close();
      n++;
    } catch {
      // a session the test's replicas no longer hold
    }
  }
  return { closed: n };
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    const cmd = JSON.parse(line);
    switch (cmd.op) {
      case "open":
        answer = await open(cmd.sessions);
        break;
      case "round":
        answer = await round(cmd.calls);
        break;
      case "ids":
        answer = { ids: sessions.map((s) => s.transport.sessionId) };
        break;
      case "close":
        answer = await closeAll();
        process.stdout.write(JSON.stringify(answer) + "\n");
        process.exit(0);
      default:
        answer = { fatal: `unknown op ${JSON.stringify(cmd.op)}` };
    }
  } catch (err) {
    answer = { fatal: err?.message ?? String(err) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
// stdin ended (the test is gone): end the sessions' sockets with the process.
process.exit(0);
