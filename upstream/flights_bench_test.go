package upstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

type benchKey int

// BenchmarkFlights is a proxied call's flight: begun with a handler of the
// upstream's requests, in a context a few values deep, and ended.
func BenchmarkFlights(b *testing.B) {
	var f flights
	ask := func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) { return nil, nil }
	ctx := context.Background()
	for k := range benchKey(4) {
		ctx = context.WithValue(ctx, k, k)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, id := f.begin(ctx, "tools/call", ask, identity.Local(), false)
		f.end(id)
	}
}
