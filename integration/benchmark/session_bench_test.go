package benchmark

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
)

// sessionSources is how many loopback addresses the idle-session client dials from.
const sessionSources = 16

// BenchmarkIdleSession measures what an idle HTTP session costs the aggregator: each
// iteration opens one more session (initialize, then notifications/initialized) and keeps
// it open, and KiB/session is the growth of the aggregator's resident set size divided by
// the number of sessions. "post-only" sessions never open the GET stream; "get-stream"
// sessions also hold the standalone GET stream open, as a client listening for
// tools/list_changed does. ns/op is the time to open one session. Recommended:
// -benchtime=1000x (1,000 sessions).
func BenchmarkIdleSession(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "post-only"
		if stream {
			name = "get-stream"
		}
		b.Run(name, func(b *testing.B) {
			a := startHTTPAggregator(b, writeConfig(b, renderConfig(demoTools("demo"))))
			// More connections than one client address may hold: 1,000 GET streams
			// against a cap of 256 per address.
			client := newSpreadHTTPClient(sessionSources)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // ends the GET streams
			// One session first, so that what the first session alone initializes
			// (and the wait for the initial load) is not charged to the others.
			warm := dialHTTP(b, client, a.url)
			if _, err := warm.request(ctx, "tools/list", map[string]any{}); err != nil {
				b.Fatal(err)
			}
			before, err := a.rssKiB()
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				c, err := openHTTP(ctx, client, a.url)
				if err != nil {
					b.Fatalf("session %d: %v", i+1, err)
				}
				if stream {
					if err := openStream(ctx, client, a.url, c.t.GetSessionId()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			after, err := a.rssKiB()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(after-before)/float64(b.N), "KiB/session")
			b.ReportMetric(float64(after)/1024, "MiB-rss")
		})
	}
}

// openStream opens the standalone GET stream of a session and returns once the server has
// answered with its headers; the stream stays open until ctx ends.
func openStream(ctx context.Context, client *http.Client, url, sessionID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(transport.HeaderKeySessionID, sessionID)
	req.Header.Set(transport.HeaderKeyProtocolVersion, protocolVersion)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fmt.Errorf("GET stream: HTTP %s", resp.Status)
	}
	// Read nothing: the body is released when ctx ends.
	go func() {
		<-ctx.Done()
		resp.Body.Close()
	}()
	return nil
}
