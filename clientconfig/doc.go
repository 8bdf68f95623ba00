// Package clientconfig writes what an MCP client needs to start the
// aggregator: for each client `client-config` knows (Claude Code, Claude
// Desktop, Cursor, VS Code, Gemini CLI, Codex, the MCP Inspector), the shell
// line or config snippet that runs this binary by a path that lasts, with
// its config files pinned by absolute path, and where the user puts it. A
// client starts its servers in a working directory of its own choosing,
// where no default config would be found.
package clientconfig
