package telemetry

import (
	"net/url"
	"strings"
)

// Variables that carry the exporter's credentials besides the endpoint.
const (
	envHeaders       = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
)

// Secrets returns the credentials the OTLP exporter is configured with, for
// the log to be scrubbed of: every header value of OTEL_EXPORTER_OTLP_HEADERS
// and its _TRACES_ form (as written and decoded, and an Authorization value's
// credential without its scheme), and the user information and query values
// of the endpoints. A collector that refuses an export may quote them, and the
// refusal is logged. getenv is os.Getenv outside tests.
func Secrets(getenv func(string) string) []string {
	var out []string
	for _, name := range []string{envHeaders, envTracesHeaders} {
		for _, pair := range strings.Split(getenv(name), ",") {
			_, value, ok := strings.Cut(pair, "=")
			if value = strings.TrimSpace(value); !ok || value == "" {
				continue
			}
			out = append(out, value)
			if decoded, err := url.PathUnescape(value); err == nil {
				out = append(out, decoded)
				value = decoded
			}
			if _, credential, ok := strings.Cut(value, " "); ok && strings.TrimSpace(credential) != "" {
				out = append(out, strings.TrimSpace(credential))
			}
		}
	}
	for _, name := range []string{envEndpoint, envTracesEndpoint} {
		u, err := url.Parse(strings.TrimSpace(getenv(name)))
		if err != nil {
			continue
		}
		if u.User != nil {
			out = append(out, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
	}
	return out
}
