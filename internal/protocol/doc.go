// Package protocol names the MCP protocol versions the aggregator speaks and
// tells the two generations apart: versions up to 2025-11-25 are
// session-based (initialize, a session id), 2026-07-28 and later are
// sessionless (server/discover, per-request _meta). Every package asks it,
// so the answer to "which generation is this?" is written once.
package protocol
