// Package proxy is the downstream MCP server: it holds the exported catalog
// and who owns each name, reconciles the desired config with what is
// running (one short commit per server), routes each call to the instance
// that serves its session, answers the admin tools, and tells clients when
// the catalog changed.
package proxy
