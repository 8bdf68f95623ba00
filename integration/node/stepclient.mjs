// stepclient.mjs - what sdkclient.mjs and sdk2client.mjs share: their command line, the
// script of steps read from stdin, the tap that records every message crossing the
// transport, and the one JSON object each writes to stdout.
//
// It imports no SDK: each client passes in the transport classes of its own SDK.

// parseArgs reads "--stdio <command> [args...]" or "--http <url> [--header 'Name: value']...";
// name is the script's file name, for the usage line.
export function parseArgs(name, argv) {
  const usage = `usage: ${name} --stdio <command> [args...] | --http <url> [--header 'Name: value']...`;
  const mode = argv[0];
  if (mode === "--stdio") {
    if (argv.length < 2) throw new Error(usage);
    return { mode: "stdio", command: argv[1], args: argv.slice(2) };
  }
  if (mode === "--http") {
    if (argv.length < 2) throw new Error(usage);
    const headers = {};
    for (let i = 2; i < argv.length; i++) {
      if (argv[i] !== "--header" || i + 1 >= argv.length) throw new Error(usage);
      const h = argv[++i];
      const colon = h.indexOf(":");
      if (colon <= 0) throw new Error(`bad header ${JSON.stringify(h)}`);
      headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
    }
    return { mode: "http", url: argv[1], headers };
  }
  throw new Error(usage);
}

// readScript reads the JSON array of steps from stdin; a step whose op is not one of ops
// fails it before anything is sent.
export async function readScript(ops) {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const script = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  if (!Array.isArray(script)) throw new Error("script must be a JSON array of steps");
  for (const step of script) {
    if (!ops.includes(step?.op)) throw new Error(`unknown step op ${JSON.stringify(step?.op)}`);
  }
  return script;
}

// openTransport makes the transport opts names from the SDK's own classes: a child
// process whose stderr is ours, or streamable HTTP with the headers given.
export function openTransport(opts, { StdioClientTransport, StreamableHTTPClientTransport }) {
  if (opts.mode === "stdio") {
    return new StdioClientTransport({
      command: opts.command,
      args: opts.args,
      env: { ...process.env },
      stderr: "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(opts.url), {
    requestInit: { headers: opts.headers },
  });
}

export function errorEntry(err) {
  return {
    error: {
      code: typeof err?.code === "number" ? err.code : null,
      message: err?.message ?? String(err),
      data: err?.data ?? null,
    },
  };
}

// Observe every message crossing the transport without changing it: onIn sees each
// incoming message before the SDK does, onOut each outgoing one. The v2 SDK chains a
// handler it finds already set (the HTTP probe runs in place before connect), so one
// message object can pass the wrapper twice; it is reported once.
export function tapTransport(transport, onIn, onOut) {
  const seen = new WeakSet();
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    enumerable: true,
    get: () =>
      handler &&
      ((msg, extra) => {
        if (msg !== null && typeof msg === "object" && !seen.has(msg)) {
          seen.add(msg);
          onIn(msg);
        }
        return handler(msg, extra);
      }),
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

// Waiters are the steps waiting for something the tap or a callback sees: wake wakes
// them all, and each one's wait ends then or at its deadline (ms since the epoch).
export class Waiters {
  #waiting = [];

  wake() {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const w of waiting) w();
  }

  // waitUntil waits until done() holds or the deadline passes, and returns done().
  async waitUntil(done, deadline) {
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return true;
  }
}

// runSteps runs each step of script by its op in steps, in order; a step that throws
// leaves its error as its result and the script goes on.
export async function runSteps(script, steps) {
  const results = [];
  for (const step of script) {
    try {
      results.push(await steps[step.op](step));
    } catch (err) {
      results.push(errorEntry(err));
    }
  }
  return results;
}

// exitWith writes what main resolves to as the one line of stdout and exits 0, or
// {"fatal": message} and exits 1 when it fails.
export function exitWith(main) {
  const write = (obj, code) => process.stdout.write(JSON.stringify(obj) + "\n", () => process.exit(code));
  main().then(
    (out) => write(out, 0),
    (err) => write({ fatal: err?.message ?? String(err) }, 1),
  );
}
