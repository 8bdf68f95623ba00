// httpfront.mjs - what inputserver.mjs and taskextserver.mjs share: node:http in front
// of the SDK v2's web-standard handler (createMcpHandler), on 127.0.0.1 and a free
// port, announced on stdout as "<name>: listening http://127.0.0.1:<port>/mcp"; the
// process ends when its stdin closes.
//
// It imports no SDK: each server passes in its own handler.

import http from "node:http";

// serveHTTP serves handler (anything with fetch(Request) -> Response) over HTTP; name
// starts the lines it writes, its announcement and the errors it reports on stderr.
export function serveHTTP(name, handler) {
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
      process.stderr.write(`${name}: ${err?.stack ?? err}\n`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });

  httpServer.listen(0, "127.0.0.1", () => {
    process.stdout.write(`${name}: listening http://127.0.0.1:${httpServer.address().port}/mcp\n`);
  });
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
}
