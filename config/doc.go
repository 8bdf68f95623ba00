// Package config turns mcp-aggregator's YAML config files into a validated Workspace.
// It parses and merges the files, resolves environment references, validates every server
// and hashes it, reporting everything it finds as Problem values; it never starts anything.
package config
