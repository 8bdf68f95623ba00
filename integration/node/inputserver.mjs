#!/usr/bin/env node
// inputserver.mjs - a protocol 2026-07-28 MCP server built on the TypeScript SDK v2
// (@modelcontextprotocol/server) that asks for input the way that generation does:
// it answers input_required, with inputRequests and a requestState, and completes
// when the client retries with inputResponses.
//
// The Go end-to-end tests put it behind the gateway as a streamable-HTTP upstream
// pinned to 2026-07-28 and drive the gateway with a 2025-11-25 client, which knows
// nothing of input_required: the gateway has to ask that client with
// elicitation/create, sampling/createMessage and roots/list requests and retry
// upstream with the answers. The handler serves 2026-07-28 only (legacy: "reject"),
// and the SDK's own shim that would ask a 2025-era client itself is off, so nothing
// but the gateway can bridge.
//
// Usage: node inputserver.mjs   (listens on 127.0.0.1, a free port; prints
//        "inputserver: listening http://127.0.0.1:<port>/mcp" on stdout)
//        node inputserver.mjs --stdio   (serves one connection on stdin/stdout)
//
// Tools (one text item each):
//   confirm_name {}          elicitation (name) -> "hello <name>"
//   sample {"prompt": "..."} sampling -> "model said: <text>"
//   interview {}             two rounds: elicitation (name), then sampling about it,
//                            the name carried in requestState -> "<name>: <model text>"
//   list_roots {}            roots/list -> the root URIs joined with ","
// Prompt "greeting" {}       elicitation (name) -> one user message "Greet <name>"
//   progress_input {}        progress "before" (1/3), then elicitation (name); on the
//                            retry progress "after" (2/3), then "hello <name>"
//   wait_after_input {}      elicitation (name); on the retry progress "waiting", then
//                            waits until the request is cancelled (stderr:
//                            "inputserver: cancelled wait_after_input") or 60s pass
//   log_levels {}            logs "d" at debug, "i" at info, "w" at warning (the SDK
//                            sends those at or above the request's _meta log level)
//   log_tagged {"tag": "..."} logs "<tag>-1" at info, 300ms later "<tag>-2"
//   touch_note {}            publishes notifications/resources/updated for input://note
// Resource "input://note"    text "a note"; subscribable (subscriptions/listen)
//   in_region {"region": "...", "query": "..."}  "region" is mirrored into header
//                            Mcp-Param-Region (x-mcp-header), which the SDK checks
//                            against the body -> "<query> in <region>"
//   add_tool {}              registers tool "extra_tool" from now on and publishes
//                            notifications/tools/list_changed on subscriptions/listen

import { McpServer, createMcpHandler, inputRequired, acceptedContent, inputResponse } from "@modelcontextprotocol/server";
import { z } from "zod";
import { serveHTTP } from "./httpfront.mjs";

const nameSchema = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };

function text(t) {
  return { content: [{ type: "text", text: t }] };
}

function sampled(responses, key) {
  const r = responses?.[key];
  return r?.content?.type === "text" ? r.content.text : undefined;
}

function build() {
  const server = new McpServer({ name: "inputserver", version: "1.0.0" }, { capabilities: { logging: {}, resources: { subscribe: true } }, inputRequired: { legacyShim: false } });

  server.registerTool("confirm_name", { description: "Asks for a name.", inputSchema: z.object({}) }, async (_args, ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (got === undefined) {
      return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: "What is your name?", requestedSchema: nameSchema }) } });
    }
    return text(`hello ${got.name}`);
  });

  server.registerTool(
    "in_region",
    { description: "Runs a query in a region.", inputSchema: z.object({ region: z.string().meta({ "x-mcp-header": "Region" }), query: z.string() }) },
    async ({ region, query }) => text(`${query} in ${region}`),
  );

  server.registerTool("sample", { description: "Asks the model.", inputSchema: z.object({ prompt: z.string() }) }, async ({ prompt }, ctx) => {
    const said = sampled(ctx.mcpReq.inputResponses, "llm");
    if (said === undefined) {
      return inputRequired({
        inputRequests: { llm: inputRequired.createMessage({ messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 50 }) },
      });
    }
    return text(`model said: ${said}`);
  });

  server.registerTool("interview", { description: "Two rounds.", inputSchema: z.object({}) }, async (_args, ctx) => {
    const state = ctx.mcpReq.requestState?.();
    if (typeof state === "string") {
      const { name } = JSON.parse(Buffer.from(state, "base64url").toString("utf8"));
      const said = sampled(ctx.mcpReq.inputResponses, "poem");
      if (said !== undefined) return text(`${name}: ${said}`);
    }
    const got = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (got === undefined) {
      return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: "Round 1: your name?", requestedSchema: nameSchema }) } });
    }
    return inputRequired({
      inputRequests: {
        poem: inputRequired.createMessage({ messages: [{ role: "user", content: { type: "text", text: `Round 2: a poem about ${got.name}` } }], maxTokens: 50 }),
      },
      requestState: Buffer.from(JSON.stringify({ name: got.name })).toString("base64url"),
    });
  });

  server.registerTool("list_roots", { description: "Lists the roots.", inputSchema: z.object({}) }, async (_args, ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, "roots");
    const roots = ctx.mcpReq.inputResponses?.roots?.roots;
    if (view.kind === "missing" || !Array.isArray(roots)) {
      return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
    }
    return text(roots.map((r) => r.uri).join(","));
  });

  server.registerPrompt("greeting", { description: "Greets whoever answers.", argsSchema: z.object({}) }, async (_args, ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (got === undefined) {
      return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: "Prompt: who is to be greeted?", requestedSchema: nameSchema }) } });
    }
    return { messages: [{ role: "user", content: { type: "text", text: `Greet ${got.name}` } }] };
  });

  server.registerTool("progress_input", { description: "Progress around one input round.", inputSchema: z.object({}) }, async (_args, ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (got === undefined) {
      await progress(ctx, 1, "before");
      return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: "Progress: your name?", requestedSchema: nameSchema }) } });
    }
    await progress(ctx, 2, "after");
    return text(`hello ${got.name}`);
  });

  server.registerTool("wait_after_input", { description: "Waits after one input round.", inputSchema: z.object({}) }, async (_args, ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (got === undefined) {
      return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: "Wait: your name?", requestedSchema: nameSchema }) } });
    }
    await progress(ctx, 1, "waiting");
    const signal = ctx.mcpReq.signal;
    const cancelled = await new Promise((resolve) => {
      if (signal.aborted) return resolve(true);
      const timer = setTimeout(() => resolve(false), 60_000);
      signal.addEventListener("abort", () => { clearTimeout(timer); resolve(true); }, { once: true });
    });
    if (cancelled) process.stderr.write("inputserver: cancelled wait_after_input\n");
    return text(cancelled ? "cancelled" : `waited for ${got.name}`);
  });

  server.registerTool("log_levels", { description: "Logs at three levels.", inputSchema: z.object({}) }, async (_args, ctx) => {
    await ctx.mcpReq.log("debug", "d", "levels");
    await ctx.mcpReq.log("info", "i", "levels");
    await ctx.mcpReq.log("warning", "w", "levels");
    return text("logged");
  });

  server.registerTool("log_tagged", { description: "Logs its tag twice, 300ms apart.", inputSchema: z.object({ tag: z.string() }) }, async ({ tag }, ctx) => {
    await ctx.mcpReq.log("info", `${tag}-1`, "tagged");
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ctx.mcpReq.log("info", `${tag}-2`, "tagged");
    return text(tag);
  });

  server.registerResource("note", "input://note", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "a note" }],
  }));

  server.registerTool("touch_note", { description: "Announces that input://note changed.", inputSchema: z.object({}) }, async () => {
    handler?.notify.resourceUpdated("input://note");
    return text("touched");
  });

  server.registerTool("add_tool", { description: "Adds extra_tool.", inputSchema: z.object({}) }, async () => {
    extraTool = true;
    handler?.notify.toolsChanged(); // over HTTP: to every subscriptions/listen stream
    return text("added");
  });

  if (extraTool) {
    server.registerTool("extra_tool", { description: "Added at runtime.", inputSchema: z.object({}) }, async () => text("extra"));
  }

  return server;
}

// extraTool: add_tool was called; every server built from then on has extra_tool.
let extraTool = false;

// progress sends a progress notification on the request's stream, when it has a token.
async function progress(ctx, n, message) {
  const token = ctx.mcpReq._meta?.progressToken;
  if (token === undefined) return;
  await ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: token, progress: n, total: 3, message } });
}

const onerror = (e) => process.stderr.write(`inputserver: ${e?.message ?? e}\n`);

// handler serves HTTP; over stdio (--stdio) there is none.
let handler;

if (process.argv.includes("--stdio")) {
  // One connection on stdin/stdout, 2026-07-28 only as well.
  const { serveStdio } = await import("@modelcontextprotocol/server/stdio");
  serveStdio(() => build(), { legacy: "reject", onerror });
} else {
  handler = createMcpHandler(() => build(), { legacy: "reject", onerror });
  serveHTTP("inputserver", handler);
}
