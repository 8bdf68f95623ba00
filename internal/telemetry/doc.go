// Package telemetry records the aggregator's OpenTelemetry traces: a span
// for each downstream request and a child span for each call it makes to an
// upstream, exported over OTLP as the standard OTEL_* environment variables
// configure, and W3C trace context read from and written to a request's
// _meta (traceparent, tracestate) as MCP's SEP-414 describes.
//
// Tracing is off unless an OTLP endpoint is configured; then FromEnv
// returns a nil *Tracer, every method of which does nothing, so that the
// callers pay one nil check per request.
package telemetry
