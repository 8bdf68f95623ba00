// Package naming decides which upstream tools a server exports and under which names.
// Given one server's rules and the tool names its upstream reported, Apply filters them,
// enforces strict or dynamic admission, applies the rename transforms, checks name validity
// and resolves collisions, returning a Plan of admitted tools, the tools its filters
// excluded (summarized in one line, since the config asked for it) and the problems found.
// It also names a server's ui:// app resources (MCP Apps) under a name of the server's own.
package naming
