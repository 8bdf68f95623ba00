#!/usr/bin/env node
// askserver.mjs - an MCP server built on the TypeScript SDK 1.x
// (@modelcontextprotocol/sdk) that asks its client for input in the middle of
// requests, the way servers of protocol 2025-11-25 and older do: with
// elicitation/create, sampling/createMessage and roots/list requests of its own.
//
// The Go end-to-end tests put it behind the gateway (stdio) and drive the gateway
// with a protocol 2026-07-28 client, which takes no server requests: the gateway has
// to turn each of them into an input_required result and the client's retry back
// into the answer.
//
// Usage: node askserver.mjs
//
// Tools (every result is one text item, and structuredContent with the same facts):
//   elicit_name {}            elicitation/create for {name}; "hello <name>", or
//                             "elicitation <action>" when not accepted
//   sample {"prompt": "..."}  sampling/createMessage with the prompt; "model said: <text>"
//   interview {}              three rounds in turn: elicitation (name), elicitation
//                             (color), sampling (a poem about both);
//                             "<name> likes <color>: <model text>"
//   both {}                   elicitation and sampling at once (Promise.all)
//   list_roots {}             roots/list; the root URIs joined with ","
// Prompt "greeting" {}        elicitation/create for {name}; one user message "Greet <name>"
// Resource "ask://whoami"     elicitation/create for {name}; text "you are <name>"
//   progress_ask {}           progress "before" (1/3), elicitation/create for {name},
//                             progress "after" (2/3); "hello <name>"
//   ask_then_wait {}          elicitation/create for {name}, progress "waiting" (1/3),
//                             then waits until the call is withdrawn
//                             ("askserver: cancelled ask_then_wait") or 60s pass
//
// When the client withdraws a tool call, "askserver: cancelled <tool>" goes to stderr;
// when elicit_name's elicitation fails, "askserver: elicit_name got no answer: <error>".

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "askserver", version: "1.0.0" });

const nameSchema = {
  type: "object",
  properties: { name: { type: "string", description: "Your name" } },
  required: ["name"],
};

async function askName(message) {
  const r = await server.server.elicitInput({ message, requestedSchema: nameSchema });
  return r.action === "accept" ? String(r.content?.name) : null;
}

async function sample(prompt) {
  const r = await server.server.createMessage({
    messages: [{ role: "user", content: { type: "text", text: prompt } }],
    maxTokens: 50,
  });
  return r.content?.type === "text" ? r.content.text : JSON.stringify(r.content);
}

// watch logs to stderr when the client withdraws a request (notifications/cancelled),
// so that a test can see the gateway give up on a call upstream.
function watch(extra, what) {
  extra?.signal?.addEventListener("abort", () => process.stderr.write(`askserver: cancelled ${what}\n`), { once: true });
}

function text(t, facts) {
  return { content: [{ type: "text", text: t }], structuredContent: facts };
}

server.registerTool("elicit_name", { description: "Asks for a name." }, async (extra) => {
  watch(extra, "elicit_name");
  let name;
  try {
    name = await askName("What is your name?");
  } catch (err) {
    process.stderr.write(`askserver: elicit_name got no answer: ${err?.message ?? err}\n`);
    throw err;
  }
  return name === null ? text("elicitation not accepted", { name: null }) : text(`hello ${name}`, { name });
});

server.registerTool(
  "sample",
  { description: "Asks the client's model.", inputSchema: { prompt: z.string() } },
  async ({ prompt }, extra) => {
    watch(extra, "sample");
    const said = await sample(prompt);
    return text(`model said: ${said}`, { said });
  },
);

server.registerTool("interview", { description: "Asks three times in turn." }, async (extra) => {
  watch(extra, "interview");
  const name = await askName("Round 1: your name?");
  const color = await server.server.elicitInput({
    message: `Round 2: ${name}, your favourite color?`,
    requestedSchema: { type: "object", properties: { color: { type: "string" } }, required: ["color"] },
  });
  const said = await sample(`Round 3: a poem about ${name} and ${color.content?.color}`);
  return text(`${name} likes ${color.content?.color}: ${said}`, { name, color: color.content?.color, said });
});

server.registerTool("both", { description: "Asks twice at once." }, async () => {
  const [name, said] = await Promise.all([askName("Both: your name?"), sample("Both: say something")]);
  return text(`${name} / ${said}`, { name, said });
});

server.registerTool("list_roots", { description: "Lists the client's roots." }, async () => {
  const r = await server.server.listRoots();
  const uris = r.roots.map((root) => root.uri);
  return text(uris.join(","), { uris });
});

server.registerPrompt("greeting", { description: "Greets whoever answers." }, async () => {
  const name = await askName("Prompt: who is to be greeted?");
  return { messages: [{ role: "user", content: { type: "text", text: `Greet ${name}` } }] };
});

server.registerResource("whoami", "ask://whoami", { mimeType: "text/plain" }, async (uri) => {
  const name = await askName("Resource: who are you?");
  return { contents: [{ uri: uri.href, mimeType: "text/plain", text: `you are ${name}` }] };
});

// progress sends a progress notification for the call, when it has a token.
async function progress(extra, n, message) {
  const token = extra?._meta?.progressToken;
  if (token === undefined) return;
  await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: n, total: 3, message } });
}

server.registerTool("progress_ask", { description: "Progress around one elicitation." }, async (extra) => {
  await progress(extra, 1, "before");
  const name = await askName("Progress: your name?");
  await progress(extra, 2, "after");
  return text(`hello ${name}`, { name });
});

server.registerTool("ask_then_wait", { description: "Waits after one elicitation." }, async (extra) => {
  const name = await askName("Wait: your name?");
  await progress(extra, 1, "waiting");
  const signal = extra.signal;
  const cancelled = await new Promise((resolve) => {
    if (signal.aborted) return resolve(true);
    const timer = setTimeout(() => resolve(false), 60_000);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(true); }, { once: true });
  });
  if (cancelled) process.stderr.write("askserver: cancelled ask_then_wait\n");
  return text(cancelled ? "cancelled" : `waited for ${name}`, { name });
});

await server.connect(new StdioServerTransport());
