// Package upstream owns one connection to one upstream MCP server instance:
// it spawns or connects, performs the initialize handshake, lists tools and
// forwards calls with their progress and cancellation, keeping every message
// as the raw JSON the upstream sent. Closing an instance follows the MCP
// shutdown sequence and leaves no process behind.
package upstream
