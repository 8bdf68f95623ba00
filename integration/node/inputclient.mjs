#!/usr/bin/env node
// inputclient.mjs - answer a server's requests for input with an official TypeScript
// SDK client, of either generation, and report what was asked and what came back.
//
// --sdk 2: the SDK v2 client (@modelcontextprotocol/client) pinned to protocol
//   2026-07-28. It takes no server requests: a request the server needs input for
//   comes back as an input_required result, which the SDK answers with the handlers
//   below and retries with inputResponses and requestState until the final result.
// --sdk 1: the SDK 1.x client (@modelcontextprotocol/sdk) on protocol 2025-11-25,
//   whose handlers answer the server's own elicitation/create, sampling/createMessage
//   and roots/list requests.
//
// Usage: node inputclient.mjs --sdk 1|2 --http <url> [--token <bearer token>]
//
// A JSON object is read from stdin:
//   {"capabilities": ["elicitation", "sampling", "roots"],   // the handlers to declare
//                                                           // ("elicitation-url": elicitation, URL mode too)
//    "answers": {"elicitation": [{...ElicitResult...}, ...],  // used in turn; the last repeats
//                "sampling": [{...CreateMessageResult...}, ...],
//                "roots": {"roots": [...]}},
//    "steps": [{"op": "callTool", "name": "...", "arguments": {...}},
//              {"op": "getPrompt", "name": "...", "arguments": {...}},
//              {"op": "readResource", "uri": "..."}]}
// An elicitation answer {"browse": true, ...ElicitResult} first opens the URL of a
// URL-mode elicitation as a browser would (following every redirect), then answers
// with the rest.
// Exactly one JSON object is written to stdout:
//   {"results": [{"result": {...}} | {"error": {"code", "message", "data"}}, ...],
//    "asked": [{"method": "...", "params": {...}}, ...],   // every request the handlers got
//    "wire": [{"method": "...", "result"|"error": ...}, ...]}  // every response as received
// or {"fatal": "message"} with exit code 1.

const DEFAULT_TIMEOUT_MS = 60_000;

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === "--sdk") out.sdk = argv[i + 1];
    else if (argv[i] === "--http") out.url = argv[i + 1];
    else if (argv[i] === "--token") out.token = argv[i + 1];
    else throw new Error("usage: inputclient.mjs --sdk 1|2 --http <url> [--token <bearer token>]");
  }
  if (!["1", "2"].includes(out.sdk) || !out.url) throw new Error("usage: inputclient.mjs --sdk 1|2 --http <url> [--token <bearer token>]");
  return out;
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function errorEntry(err) {
  return { error: { code: typeof err?.code === "number" ? err.code : null, message: err?.message ?? String(err), data: err?.data ?? null } };
}

// Records every message off the wire without changing it.
function tap(transport, wire) {
  const methods = new Map();
  let handler;
  const seen = new WeakSet();
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () =>
      handler &&
      ((msg, extra) => {
        if (msg && typeof msg === "object" && !seen.has(msg)) {
          seen.add(msg);
          if (msg.method === undefined && msg.id !== undefined && methods.has(msg.id)) {
            const method = methods.get(msg.id);
            wire.push(msg.error === undefined ? { method, result: msg.result } : { method, error: msg.error });
          }
        }
        return handler(msg, extra);
      }),
    set: (h) => {
      handler = h;
    },
  });
  const send = transport.send.bind(transport);
  transport.send = (msg, options) => {
    if (typeof msg?.method === "string" && msg.id !== undefined) methods.set(msg.id, msg.method);
    return send(msg, options);
  };
}

async function connect(opts, capabilities) {
  const caps = {};
  for (const c of capabilities) {
    if (c === "elicitation-url") caps.elicitation = { form: {}, url: {} };
    else caps[c] = c === "roots" ? { listChanged: true } : {};
  }
  const info = { name: "mcp-aggregator-inputclient", version: "1.0.0" };
  const transportOptions = opts.token ? { requestInit: { headers: { Authorization: `Bearer ${opts.token}` } } } : undefined;
  if (opts.sdk === "2") {
    const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
    const client = new Client(info, { capabilities: caps, versionNegotiation: { mode: { pin: "2026-07-28" } } });
    return { client, transport: new StreamableHTTPClientTransport(new URL(opts.url), transportOptions), methods: (m) => m };
  }
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const types = await import("@modelcontextprotocol/sdk/types.js");
  const schemas = {
    "elicitation/create": types.ElicitRequestSchema,
    "sampling/createMessage": types.CreateMessageRequestSchema,
    "roots/list": types.ListRootsRequestSchema,
  };
  const client = new Client(info, { capabilities: caps });
  return { client, transport: new StreamableHTTPClientTransport(new URL(opts.url), transportOptions), methods: (m) => schemas[m] };
}

// elicit answers an elicitation with answer, opening its URL first when the answer
// says browse.
async function elicit(answer, request) {
  const { browse, ...result } = answer;
  if (browse) {
    const resp = await fetch(request.params.url, { redirect: "follow" });
    await resp.text();
    if (!resp.ok) throw new Error(`opening the elicitation's URL: HTTP ${resp.status}`);
  }
  return result;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const input = await readStdin();
  const asked = [];
  const wire = [];
  const answers = input.answers ?? {};
  const turn = { elicitation: 0, sampling: 0 };
  const next = (kind) => {
    const list = answers[kind] ?? [];
    if (list.length === 0) throw new Error(`no ${kind} answer scripted`);
    return list[Math.min(turn[kind]++, list.length - 1)];
  };
  const { client, transport, methods } = await connect(opts, input.capabilities ?? []);
  const handlers = {
    elicitation: ["elicitation/create", (request) => elicit(next("elicitation"), request)],
    "elicitation-url": ["elicitation/create", (request) => elicit(next("elicitation"), request)],
    sampling: ["sampling/createMessage", () => next("sampling")],
    roots: ["roots/list", () => answers.roots ?? { roots: [] }],
  };
  for (const c of input.capabilities ?? []) {
    const [method, answer] = handlers[c];
    client.setRequestHandler(methods(method), async (request) => {
      asked.push({ method, params: request.params ?? null });
      return answer(request);
    });
  }
  tap(transport, wire);
  await client.connect(transport);
  const results = [];
  for (const step of input.steps ?? []) {
    const options = { timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS };
    try {
      switch (step.op) {
        case "callTool":
          const params = { name: step.name, arguments: step.arguments ?? {} };
          results.push({ result: await (opts.sdk === "2" ? client.callTool(params, options) : client.callTool(params, undefined, options)) });
          break;
        case "getPrompt":
          results.push({ result: await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, options) });
          break;
        case "readResource":
          results.push({ result: await client.readResource({ uri: step.uri }, options) });
          break;
        default:
          throw new Error(`unknown step op ${JSON.stringify(step.op)}`);
      }
    } catch (err) {
      results.push(errorEntry(err));
    }
  }
  await client.close();
  return { results, asked, wire };
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0)),
  (err) => process.stdout.write(JSON.stringify({ fatal: err?.stack ?? String(err) }) + "\n", () => process.exit(1)),
);
