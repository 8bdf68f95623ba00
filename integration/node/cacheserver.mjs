#!/usr/bin/env node
// cacheserver.mjs - a protocol 2026-07-28 MCP server built on the TypeScript SDK v2
// (@modelcontextprotocol/server) whose resources carry the caching hints of that
// generation, set through the SDK's own cacheHint of registerResource.
//
// The Go end-to-end tests put it behind the gateway over stdio, pinned to 2026-07-28,
// and count how many reads reach it: each read answers "read N", N counting every read
// this process served.
//
// Usage: node cacheserver.mjs   (serves one connection on stdin/stdout)
//
// Resources:
//   cache://public   ttlMs 600000, cacheScope public
//   cache://private  ttlMs 600000, cacheScope private
//   cache://none     no hint of its own (the SDK sends its defaults)

import { McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

// reads counts every read served, across the servers serveStdio builds.
let reads = 0;

function build() {
  const server = new McpServer({ name: "cacheserver", version: "1.0.0" }, { capabilities: { resources: {} } });
  const read = async (uri) => {
    reads++;
    return { contents: [{ uri: uri.href, mimeType: "text/plain", text: `read ${reads}` }] };
  };
  server.registerResource("public", "cache://public", { mimeType: "text/plain", cacheHint: { ttlMs: 600000, cacheScope: "public" } }, read);
  server.registerResource("private", "cache://private", { mimeType: "text/plain", cacheHint: { ttlMs: 600000, cacheScope: "private" } }, read);
  server.registerResource("none", "cache://none", { mimeType: "text/plain" }, read);
  return server;
}

serveStdio(() => build(), { legacy: "reject", onerror: (e) => process.stderr.write(`cacheserver: ${e?.message ?? e}\n`) });
