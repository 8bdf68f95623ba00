// Package charttest checks the Helm chart in ../mcp-aggregator: it renders
// the chart with helm for the default values and for ci/ha-values.yaml,
// decodes every object strictly into the Kubernetes API types (an unknown
// or misspelt field fails), and checks what the aggregator relies on:
// restricted pods, the probes on /healthz and /readyz, a termination grace
// above the drain grace, and HAProxy only when it is enabled. Where haproxy
// is installed, it also runs the rendered HAProxy config in front of two
// real aggregators that it finds by DNS, as in a cluster.
//
// It is a module of its own so that the main module does not carry the
// Kubernetes API types. helm comes from $HELM when set, else it is built
// from the Go module proxy at the version pinned in helm_test.go.
package charttest
