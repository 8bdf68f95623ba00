package benchmark

import (
	"encoding/json"
	"testing"
)

// BenchmarkResourceRead measures a repeated resources/read over stdio through the
// aggregator, from the demo "surface" server shared by every session: "cached" reads a
// URI the server answers with ttlMs 600000 and cacheScope public, which the aggregator
// serves from its result cache after the first read; "uncached" one it answers with
// ttlMs 0, which goes to the upstream every time. The difference is what the cache saves
// a client that reads the same resource again. Recommended: -benchtime=2000x.
func BenchmarkResourceRead(b *testing.B) {
	surface := upstreamServer{id: "surface", stateless: true, command: binary, args: []string{"demo-server", "surface"}}
	c, log := dialStdioAggregator(b, writeConfig(b, renderConfig(surface)))
	for _, tc := range []struct{ name, uri string }{
		{"cached", "demo://cache/public/600000/doc"},
		{"uncached", "demo://cache/public/0/doc"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			params, _ := json.Marshal(map[string]string{"uri": tc.uri})
			measureRequests(b, c, 1, "resources/read", params)
		})
	}
	if b.Failed() {
		b.Logf("aggregator stderr:\n%s", log)
	}
}
