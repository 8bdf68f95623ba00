package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The benchmark client speaks JSON-RPC through mcp-go's client transports and nothing
// more: no typed client, no result decoding. The direct and the proxied case pay exactly
// the same client cost, so the difference between them is the aggregator's.

// protocolVersion is what the client asks for in initialize.
const protocolVersion = "2025-11-25"

// setupTimeout bounds a handshake or a warm-up request; it is only reached when something
// is broken.
const setupTimeout = 30 * time.Second

// quiet is the logger handed to mcp-go transports: a benchmark's output is its figures.
var quiet = slog.New(slog.DiscardHandler)

// conn is one MCP client connection.
type conn struct {
	t      transport.Interface
	lastID atomic.Int64
	// notes receives the method of every notification the server sends; when it is full,
	// further notifications are dropped.
	notes chan string
	// pid is the process the client spoke to over stdio; 0 over HTTP.
	pid int
}

func newConn(t transport.Interface) *conn {
	c := &conn{t: t, notes: make(chan string, 64)}
	t.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		select {
		case c.notes <- n.Method:
		default:
		}
	})
	return c
}

// request sends one request and returns its result; a JSON-RPC error is an error.
func (c *conn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	resp, err := c.t.SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(c.lastID.Add(1)), Method: method, Params: params,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%s: JSON-RPC error %d: %s", method, resp.Error.Code, resp.Error.Message)
	}
	return resp.Result, nil
}

// handshake performs initialize and sends notifications/initialized.
func (c *conn) handshake(ctx context.Context) error {
	res, err := c.request(ctx, "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mcp-aggregator-benchmark", "version": "1.0.0"},
	})
	if err != nil {
		return err
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return fmt.Errorf("initialize result: %w", err)
	}
	if init.ProtocolVersion != protocolVersion {
		return fmt.Errorf("initialize: the server settled on protocol %q, want %q", init.ProtocolVersion, protocolVersion)
	}
	if h, ok := c.t.(transport.HTTPConnection); ok {
		h.SetProtocolVersion(init.ProtocolVersion)
	}
	return c.t.SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: "2.0", Notification: mcp.Notification{Method: "notifications/initialized"},
	})
}

// callParams is tools/call echo {text}, encoded once so that every call sends the same bytes.
func callParams(tool, text string) json.RawMessage {
	return callParamsWithMeta(tool, text, nil)
}

// callParamsWithMeta is callParams with a _meta as real clients send (for
// example their progressToken); none when meta is nil.
func callParamsWithMeta(tool, text string, meta map[string]any) json.RawMessage {
	params := map[string]any{"name": tool, "arguments": map[string]string{"text": text}}
	if meta != nil {
		params["_meta"] = meta
	}
	b, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	return b
}

// checkEcho makes one call and checks that the tool answered with text.
func (c *conn) checkEcho(ctx context.Context, params json.RawMessage, text string) error {
	res, err := c.request(ctx, "tools/call", params)
	if err != nil {
		return err
	}
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return fmt.Errorf("tools/call result: %w", err)
	}
	if out.IsError || len(out.Content) == 0 || out.Content[0].Text != text {
		return fmt.Errorf("tools/call: unexpected result %s", res)
	}
	return nil
}

// dialStdio starts command as a stdio MCP server, its stderr going to stderr, and
// completes the handshake. The process ends with the benchmark.
func dialStdio(tb testing.TB, stderr io.Writer, env []string, command string, args ...string) *conn {
	tb.Helper()
	var cmd *exec.Cmd
	t := transport.NewStdioWithOptions(command, env, args,
		transport.WithCommandLogger(quiet),
		transport.WithCommandFunc(func(_ context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd = exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = tb.TempDir()
			cmd.Stderr = stderr
			return cmd, nil
		}))
	if err := t.Start(context.Background()); err != nil {
		tb.Fatalf("starting %s %v: %v", command, args, err)
	}
	tb.Cleanup(func() { _ = t.Close() })
	c := newConn(t)
	c.pid = cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := c.handshake(ctx); err != nil {
		tb.Fatalf("%s %v: %v", command, args, err)
	}
	return c
}

// newHTTPClient is the HTTP client of every benchmark connection. It keeps enough idle
// connections per host for 16 requests in flight; net/http's default keeps two, and a
// client that reconnects for most requests would measure TCP setup, not MCP.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

// newSpreadHTTPClient is newHTTPClient dialling from n loopback addresses in turn
// (127.0.0.1 to 127.0.0.n), so that its connections come from n client addresses: the
// aggregator holds each client address to a fixed number of connections, which one
// benchmark client holding a thousand GET streams would otherwise exceed.
func newSpreadHTTPClient(n int) *http.Client {
	t := newHTTPClient().Transport.(*http.Transport)
	var next atomic.Uint32
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host := byte(next.Add(1)%uint32(n)) + 1
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, host)}}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: t}
}

// openHTTP opens an MCP session at url with client, without closing it at the end of
// the benchmark: the caller decides.
func openHTTP(ctx context.Context, client *http.Client, url string) (*conn, error) {
	t, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(client), transport.WithLogger(quiet))
	if err != nil {
		return nil, err
	}
	if err := t.Start(ctx); err != nil {
		return nil, err
	}
	c := newConn(t)
	if err := c.handshake(ctx); err != nil {
		_ = t.Close()
		return nil, err
	}
	return c, nil
}

// dialHTTP opens an MCP session at url that ends (with DELETE) with the benchmark.
func dialHTTP(tb testing.TB, client *http.Client, url string) *conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := openHTTP(ctx, client, url)
	if err != nil {
		tb.Fatalf("%s: %v", url, err)
	}
	tb.Cleanup(func() { _ = c.t.Close() })
	return c
}
