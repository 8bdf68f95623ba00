// Command mcp-aggregator is one MCP server that fronts many: it runs or
// connects to upstream MCP servers and re-exports their tools, filtered and
// renamed, to one downstream client over stdio or streamable HTTP. The
// command parses its subcommands and flags and wires the packages that do
// the work; what a test would want to call lives in those packages.
package main
