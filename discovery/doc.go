// Package discovery ranks the exported tools against a short request in
// words ("read a file", "create a GitHub issue") or a tool name, so that a
// client can find a tool without having every definition in its context.
// It is pure: tool definitions in, an immutable Index out, ranked hits out
// of each query; no I/O, no locks.
package discovery
