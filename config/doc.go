// Package config turns config files into a validated Workspace: mcp-aggregator's own YAML,
// and the files other MCP clients and agent frameworks keep their servers in (mcpServers
// JSON, VS Code's and TENEX's servers JSON, HoloDeck's agent.yaml, chatagent's mcps), which
// are translated into the same model. It parses and merges the files, resolves environment
// references, validates every server and hashes it, reporting everything it finds as
// Problem values at the file's own lines; it never starts anything.
package config
