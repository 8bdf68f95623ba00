// Package benchmark measures mcp-aggregator against its performance targets: a tools/call
// through the aggregator compared with the same call made directly and through the least
// one more hop can cost (a relay that copies bytes, a naive HTTP bridge), tools/list over a
// catalog of 5,000 tools, the time from a config write to tools/list_changed, memory per
// idle HTTP session, and the time to lease a stateful instance. The benchmarks run the real
// binary against real upstream processes; how to run them and the current figures are in
// docs/benchmarks.md.
package benchmark
