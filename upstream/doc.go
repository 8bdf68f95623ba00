// Package upstream owns one connection to one upstream MCP server instance:
// it spawns or connects, performs the initialize handshake, lists what the
// upstream offers (tools, resources, resource templates, prompts), forwards
// requests with their progress and cancellation, and hands back what the
// upstream sends on its own (notifications, and its requests to the client,
// attributed to the request they belong to), keeping every message as the
// raw JSON the upstream sent. Each kind of upstream is spoken to through one
// client transport of the package's own that hands over raw JSON-RPC
// messages: stdio (stdio.go), and remote for streamable HTTP and legacy SSE
// (remote.go, its event streams read by sse.go). Closing an instance follows the MCP
// shutdown sequence and leaves no process behind, not even a daemon that
// left the process group: package supervise starts and stops a stdio
// instance's processes and tracks every one of them. What an upstream sends
// cannot make the aggregator hold unbounded memory or goroutines: messages,
// stderr lines, notification-driven work and the upstream's own requests
// are all bounded (bounds.go).
package upstream
