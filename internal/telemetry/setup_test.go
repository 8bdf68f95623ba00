package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Settings
		wantErr string
	}{
		{name: "nothing set: off", want: Settings{Reason: "no OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)"}},
		{name: "endpoint: on, http/protobuf by default", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			want: Settings{Enabled: true, Protocol: "http/protobuf", Endpoint: "http://collector:4318"}},
		{name: "traces endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c.example/v1/traces"},
			want: Settings{Enabled: true, Protocol: "http/protobuf", Endpoint: "https://c.example"}},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: Settings{Enabled: true, Protocol: "grpc", Endpoint: "http://collector:4317"}},
		{name: "traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			want: Settings{Enabled: true, Protocol: "grpc", Endpoint: "http://c:4317"}},
		{name: "credentials in the endpoint are not shown", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://key:s3cret@c.example:4318/otlp?token=x"},
			want: Settings{Enabled: true, Protocol: "http/protobuf", Endpoint: "https://c.example:4318"}},
		{name: "disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"},
			want: Settings{Reason: "OTEL_SDK_DISABLED is true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
			want: Settings{Reason: "OTEL_TRACES_EXPORTER is none"}},
		{name: "exporter otlp", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"},
			want: Settings{Enabled: true, Protocol: "http/protobuf", Endpoint: "http://c:4318"}},
		{name: "unsupported protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": use http/protobuf or grpc`},
		{name: "unsupported exporter", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			wantErr: `OTEL_TRACES_EXPORTER="zipkin": this build exports traces over OTLP only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decide(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.False(t, got.Enabled)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestErrorLogIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &errorLog{log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return clock }}
	e.Handle(errors.New("first"))
	e.Handle(errors.New("second"))
	e.Handle(errors.New("third"))
	clock = clock.Add(errorInterval)
	e.Handle(fmt.Errorf("export: %w", context.DeadlineExceeded))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, "%s", buf.String())
	assert.Contains(t, lines[0], "err=first")
	assert.Contains(t, lines[1], "similar_errors_not_logged=2")
	assert.Contains(t, lines[1], "fix=")
}
