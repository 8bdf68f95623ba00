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
//
// Tools (one text item each):
//   confirm_name {}          elicitation (name) -> "hello <name>"
//   sample {"prompt": "..."} sampling -> "model said: <text>"
//   interview {}             two rounds: elicitation (name), then sampling about it,
//                            the name carried in requestState -> "<name>: <model text>"
//   list_roots {}            roots/list -> the root URIs joined with ","
// Prompt "greeting" {}       elicitation (name) -> one user message "Greet <name>"

import http from "node:http";
import { McpServer, createMcpHandler, inputRequired, acceptedContent, inputResponse } from "@modelcontextprotocol/server";
import { z } from "zod";

const nameSchema = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };

function text(t) {
  return { content: [{ type: "text", text: t }] };
}

function sampled(responses, key) {
  const r = responses?.[key];
  return r?.content?.type === "text" ? r.content.text : undefined;
}

function build() {
  const server = new McpServer({ name: "inputserver", version: "1.0.0" }, { inputRequired: { legacyShim: false } });

  server.registerTool("confirm_name", { description: "Asks for a name.", inputSchema: z.object({}) }, async (_args, ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (got === undefined) {
      return inputRequired({ inputRequests: { name: inputRequired.elicit({ message: "What is your name?", requestedSchema: nameSchema }) } });
    }
    return text(`hello ${got.name}`);
  });

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

  return server;
}

const handler = createMcpHandler(() => build(), { legacy: "reject", onerror: (e) => process.stderr.write(`inputserver: ${e?.message ?? e}\n`) });

// node:http in front of the web-standard handler.
const httpServer = http.createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
      body: ["GET", "HEAD"].includes(req.method) ? undefined : body,
      signal: abort.signal,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (err) {
    process.stderr.write(`inputserver: ${err?.stack ?? err}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});

httpServer.listen(0, "127.0.0.1", () => {
  process.stdout.write(`inputserver: listening http://127.0.0.1:${httpServer.address().port}/mcp\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
