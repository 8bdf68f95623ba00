#!/usr/bin/env node
// userloginclient.mjs - a user who logs in to an upstream through the
// gateway, with the official TypeScript SDK client.
//
// Usage: node userloginclient.mjs <gateway MCP url> <bearer token> <tool>
//
// The client declares URL-mode elicitation and calls the tool. When the
// call fails with URLElicitationRequiredError (-32042), it does what the
// user's browser would: it opens the elicitation's URL and follows every
// redirect (the authorization server approves at once and sends the browser
// back to the gateway's callback). It then waits for
// notifications/elicitation/complete naming the elicitation, and calls the
// tool again. One JSON object goes to stdout:
//   {"first": {"result"|"error": ...}, "browser": {"status": n, "finalURL": "..."},
//    "completed": true|false, "second": {"result"|"error": ...}}
// or {"fatal": "message"} with exit code 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool] = process.argv.slice(2);
const out = {};

async function call(client) {
  try {
    return { result: await client.callTool({ name: tool, arguments: {} }) };
  } catch (e) {
    return { error: { code: e.code, message: e.message, data: e.data } };
  }
}

try {
  if (!url || !token || !tool) throw new Error("usage: userloginclient.mjs <url> <token> <tool>");
  const completed = new Set();
  let wake = () => {};
  const client = new Client({ name: "userlogin-client", version: "1.0.0" },
    { capabilities: { elicitation: { url: {} } } });
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === "notifications/elicitation/complete") {
      completed.add(n.params?.elicitationId);
      wake();
    }
  };
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);

  out.first = await call(client);
  const el = out.first.error?.code === -32042 ? out.first.error.data?.elicitations?.[0] : undefined;
  if (el) {
    const resp = await fetch(el.url, { redirect: "follow" });
    await resp.text();
    out.browser = { status: resp.status, finalURL: resp.url };
    const deadline = Date.now() + 20000;
    while (!completed.has(el.elicitationId) && Date.now() < deadline) {
      await new Promise((resolve) => {
        wake = resolve;
        setTimeout(resolve, Math.max(0, deadline - Date.now()));
      });
    }
    out.completed = completed.has(el.elicitationId);
    out.second = await call(client);
  }
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
} catch (e) {
  process.stdout.write(JSON.stringify({ fatal: String(e?.stack ?? e) }) + "\n");
  process.exit(1);
}
