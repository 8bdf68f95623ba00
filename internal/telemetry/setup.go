package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES says otherwise.
const DefaultServiceName = "mcp-aggregator"

// instrumentation names the tracer, as OpenTelemetry's scope.
const instrumentation = "github.com/mcp-aggregator/mcp-aggregator"

// Tracer records spans and exports them. A nil *Tracer is tracing turned
// off: its methods do nothing and start nothing.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// New returns a Tracer recording to provider, which it owns from then on
// (Shutdown shuts it down). FromEnv builds the provider the binary uses;
// tests give one with an in-memory exporter.
func New(provider *sdktrace.TracerProvider) *Tracer {
	return &Tracer{provider: provider, tracer: provider.Tracer(instrumentation)}
}

// Shutdown exports the spans still buffered and stops the exporter, within
// ctx's deadline: spans not out by then are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Environment variables FromEnv reads itself; the exporter, the sampler,
// the batch processor and the resource read the rest of the standard set
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE,
// OTEL_TRACES_SAMPLER and _ARG, OTEL_BSP_*, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES).
const (
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Settings are what FromEnv decided from the environment, for its log line
// and for tests.
type Settings struct {
	// Enabled is false when no OTLP endpoint is set, OTEL_SDK_DISABLED is
	// true or OTEL_TRACES_EXPORTER is none; Reason then says which.
	Enabled bool
	Reason  string
	// Protocol is grpc or http/protobuf.
	Protocol string
	// Endpoint is the configured endpoint without user information, path
	// or query: as much of it as a log line may show.
	Endpoint string
}

// Decide reads the variables that turn tracing on or off and choose the
// exporter's protocol. getenv is os.Getenv outside tests. An error names
// the variable to fix; tracing is then off.
func Decide(getenv func(string) string) (Settings, error) {
	if v := strings.TrimSpace(getenv(envDisabled)); strings.EqualFold(v, "true") {
		return Settings{Reason: envDisabled + " is true"}, nil
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv(envExporter))); v {
	case "", "otlp":
	case "none":
		return Settings{Reason: envExporter + " is none"}, nil
	default:
		return Settings{}, fmt.Errorf("%s=%q: this build exports traces over OTLP only; set it to otlp (or none, or unset it)", envExporter, v)
	}
	endpoint := strings.TrimSpace(getenv(envTracesEndpoint))
	if endpoint == "" {
		endpoint = strings.TrimSpace(getenv(envEndpoint))
	}
	if endpoint == "" {
		return Settings{Reason: "no OTLP endpoint is set (" + envEndpoint + " or " + envTracesEndpoint + ")"}, nil
	}
	protocol, from := strings.TrimSpace(getenv(envTracesProtocol)), envTracesProtocol
	if protocol == "" {
		protocol, from = strings.TrimSpace(getenv(envProtocol)), envProtocol
	}
	switch protocol {
	case "":
		protocol = "http/protobuf" // the OpenTelemetry specification's default
	case "http/protobuf", "grpc":
	default:
		return Settings{}, fmt.Errorf("%s=%q: use http/protobuf or grpc", from, protocol)
	}
	return Settings{Enabled: true, Protocol: protocol, Endpoint: shownEndpoint(endpoint)}, nil
}

// shownEndpoint is scheme://host:port of an endpoint: its user
// information, path and query may hold credentials.
func shownEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "(unparsable endpoint)"
	}
	return u.Scheme + "://" + u.Host
}

// FromEnv sets up tracing as the standard OTEL_* environment variables
// configure it, or returns nil, with tracing off, when no OTLP endpoint is
// set, when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, or when the
// configuration is unusable (then logged as an error naming the variable).
// Export failures are logged, at most one line per errorInterval.
func FromEnv(ctx context.Context, log *slog.Logger, version string) *Tracer {
	s, err := Decide(os.Getenv)
	if err != nil {
		log.Error("traces are off: the OpenTelemetry configuration is unusable", "err", err)
		return nil
	}
	if !s.Enabled {
		log.Debug("traces are off", "why", s.Reason)
		return nil
	}
	// The SDK reports export and configuration errors here, not to the caller.
	otel.SetErrorHandler(&errorLog{log: log})

	var client otlptrace.Client
	if s.Protocol == "grpc" {
		client = otlptracegrpc.NewClient()
	} else {
		client = otlptracehttp.NewClient()
	}
	// New starts the client; neither protocol dials before the first export.
	exporter, err := otlptrace.New(ctx, client)
	if err != nil {
		log.Error("traces are off: the OTLP exporter cannot start", "err", err)
		return nil
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // after the defaults, so that OTEL_SERVICE_NAME wins
	)
	if err != nil && res == nil {
		log.Error("traces are off: the OpenTelemetry resource is unusable; check OTEL_RESOURCE_ATTRIBUTES", "err", err)
		return nil
	} else if err != nil {
		log.Warn("part of OTEL_RESOURCE_ATTRIBUTES was ignored", "err", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (default: parent-based,
	// always on), the batch's bounds from OTEL_BSP_*.
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	log.Info("exporting traces", "protocol", s.Protocol, "endpoint", s.Endpoint)
	return New(provider)
}

// errorInterval is the least time between two logged export errors: a
// collector that is down fails every batch.
const errorInterval = time.Minute

// errorLog is the SDK's error handler: it logs, rate-limited.
type errorLog struct {
	log        *slog.Logger
	now        func() time.Time // time.Now when nil
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	now := time.Now()
	if e.now != nil {
		now = e.now()
	}
	if !e.last.IsZero() && now.Sub(e.last) < errorInterval {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.last, e.suppressed = now, 0
	e.mu.Unlock()
	var attrs []any
	attrs = append(attrs, "err", err)
	if suppressed > 0 {
		attrs = append(attrs, "similar_errors_not_logged", suppressed)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		attrs = append(attrs, "fix", "check that the OTLP collector at "+envEndpoint+" is up and reachable")
	}
	e.log.Warn("OpenTelemetry: traces could not be exported", attrs...)
}
