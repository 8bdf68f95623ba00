package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// answeringFake answers every request at once, and keeps none.
type answeringFake struct{ *httpFake }

func (answeringFake) Handle(_ context.Context, req *Request) *jsonrpc.Message {
	if req.Msg.Method == "initialize" {
		return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
	}
	return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)}
}

// BenchmarkHTTPCall is one tools/call of a session through Serve, as the
// gateway serves it, to a Handler that answers at once: what the
// transport costs per call, with net/http's server and client.
func BenchmarkHTTPCall(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tr := NewHTTP(answeringFake{newHTTPFake()}, HTTPOptions{})
	served := make(chan error, 1)
	go func() { served <- tr.Serve(ln, tr.Endpoint(func(h http.Handler) http.Handler { return h })) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		<-served
	})
	url := "http://" + ln.Addr().String() + "/mcp"
	client := &http.Client{Transport: &http.Transport{}}
	post := func(id string, body []byte) *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if id != "" {
			req.Header.Set(headerSessionID, id)
			req.Header.Set(headerProtocol, "2025-11-25")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return resp
	}
	id := post("", []byte(initializeBody)).Header.Get(headerSessionID)
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		post(id, call)
	}
}
