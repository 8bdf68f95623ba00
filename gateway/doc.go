// Package gateway is the HTTP front of `serve --http` around the MCP
// endpoint: the address it listens on, which path serves what (the MCP
// endpoint, the probes, metrics and status page, the OAuth metadata,
// POST /drain), who may pass (the http.auth guard, swapped whole when a
// reload changes it, never dropped from a gateway other hosts can reach),
// and how a replica leaves a load balancer's rotation without failing the
// calls it runs (the drain), and the shutdown that follows it, step by step
// (Gateway.Serve). Flags, signals' first arrival and the process's exit
// stay in cmd.
package gateway
