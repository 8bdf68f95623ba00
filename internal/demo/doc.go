// Package demo implements small MCP servers that speak MCP over stdio, so
// that the aggregator can be tried with nothing configured and so that its
// end-to-end tests have real upstream processes to talk to.
//
// The servers are reached through Run (the hidden "demo-server" subcommand
// calls it) and are listed by Names:
//
//   - tools: stateless tools (echo, add, pid, big, slow, fail, env), built on
//     mcp-go's server package; with --mutable also hide_tool and show_tool,
//     which change its tool list at run time.
//   - counter: a per-process counter (increment, get, pid), also on mcp-go.
//   - fidelity: a hand-written JSON-RPC loop that replays the embedded
//     fixtures under testdata/fidelity byte for byte, to check that nothing a
//     typed client would drop (unknown keys, big integers, future content
//     types) gets lost on the way through the aggregator.
//   - misbehave MODE: a hand-written server that breaks the protocol in the
//     way MODE names, for robustness tests.
//   - surface: a hand-written server with resources, templates, prompts,
//     completions and logging, that sends its client requests (sampling,
//     elicitation, roots) and notifications on demand (surface.go).
//   - daemon: a server that forks a setsid() daemon ignoring SIGTERM, for
//     process supervision tests (daemon.go).
package demo
