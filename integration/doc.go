// Package integration holds the end-to-end tests of mcp-aggregator. They build the real
// binary once, run it over stdio and streamable HTTP in front of real upstream processes
// (the demo servers compiled into the binary and the pinned Node.js reference servers in
// node/), and compare what a client receives, as raw JSON, with what the upstreams sent.
package integration
