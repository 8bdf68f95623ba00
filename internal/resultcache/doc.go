// Package resultcache holds upstream results that carry the caching hints
// of MCP 2026-07-28 (ttlMs, cacheScope) for as long as they say they are
// fresh, bounded in entries and bytes, least recently used first out. It
// reads the hints and rewrites a served copy's ttlMs to what is left of
// it; who may share an entry is the caller's key to choose. No I/O.
package resultcache
