// Package upstream owns one connection to one upstream MCP server instance:
// it spawns or connects, performs the initialize handshake, lists tools and
// forwards calls with their progress and cancellation, keeping every message
// as the raw JSON the upstream sent. Closing an instance follows the MCP
// shutdown sequence and leaves no process behind. What an upstream sends
// cannot make the aggregator hold unbounded memory or goroutines: messages,
// stderr lines, notification-driven work and the upstream's own requests
// are all bounded (bounds.go).
package upstream
