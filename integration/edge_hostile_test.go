package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEdgeDeclaredBodyCostsWhatArrives: connections that each declare a
// body just under the 32 MiB cap and send one byte of it cost the gateway
// about what arrived, not what was declared. Several rounds of 200 of them
// from one address (within the per-client cap of 256) raise the peak
// resident set by far less than one round of declared bodies (6.4 GB);
// allocating each declared body up front took the gateway to several GB.
func TestEdgeDeclaredBodyCostsWhatArrives(t *testing.T) {
	t.Parallel()
	const (
		conns    = 200
		rounds   = 3
		declared = 32<<20 - 1
		bound    = 256 * MiB
	)
	a := coreServePlain(t, httpTransport, demoToolsConfig())
	a.waitLoaded()
	c := a.connect()
	session := coreSessionOf(t, c)
	base, _ := coreResetPeak(t, corePID(a))

	for round := 0; round < rounds; round++ {
		open := make([]net.Conn, conns)
		for i := range open {
			conn, host := coreDial(t, a)
			_, err := io.WriteString(conn, coreRequestHead(host, session, fmt.Sprintf("Content-Length: %d", declared))+"{")
			require.NoError(t, err)
			open[i] = conn
		}
		// The body ends early: each is refused once the server has read
		// what came, and the refusal is what this waits for.
		var wg sync.WaitGroup
		for _, conn := range open {
			wg.Add(1)
			go func(conn net.Conn) {
				defer wg.Done()
				defer conn.Close()
				require.NoError(t, conn.(*net.TCPConn).CloseWrite())
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if !assert.NoError(t, err) {
					return
				}
				resp.Body.Close()
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			}(conn)
		}
		wg.Wait()
	}
	growth := coreGrowth(t, corePID(a), base)
	t.Logf("%d rounds of %d bodies declared as %d MiB: peak RSS grew by %.1f MiB", rounds, conns, declared>>20, float64(growth)/MiB)
	assert.Less(t, growth, int64(bound), "bodies declared but not sent raised the peak RSS by %.1f MiB", float64(growth)/MiB)
	assert.Equal(t, "after", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "after"})))
}

// TestEdgeInvalidUTF8IsRefused: a tool call whose arguments are not
// UTF-8 is refused at the edge with a parse error naming the fix, answered
// to its id, and never reaches the upstream; the connection and the
// upstream go on serving. A byte order mark ahead of a message is ignored.
func TestEdgeInvalidUTF8IsRefused(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, demoToolsConfig())
		a.waitLoaded()
		c := a.connect()
		bad := []byte(`{"jsonrpc":"2.0","id":"bad","method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"` + "caf\xe9" + `"}}}`)
		withBOM := []byte("\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":"bom","method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"bom"}}}`)

		var badErr, bomResult json.RawMessage
		switch tr {
		case stdioTransport:
			w := c.wire.(*stdioWire)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			resp, err := w.exchange(ctx, `"bad"`, bad)
			require.NoError(t, err)
			require.Empty(t, resp.Result)
			badErr = resp.Error
			resp, err = w.exchange(ctx, `"bom"`, withBOM)
			require.NoError(t, err)
			require.Empty(t, resp.Error)
			bomResult = resp.Result
		case httpTransport:
			session := coreSessionOf(t, c)
			r := corePost(t, a.url, session, bad, nil)
			assert.Equal(t, http.StatusBadRequest, r.status)
			m := coreMessage(t, r)
			assert.JSONEq(t, `"bad"`, string(m.ID))
			badErr = m.Error
			r = corePost(t, a.url, session, withBOM, nil)
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			m = coreMessage(t, r)
			require.Empty(t, m.Error)
			bomResult = m.Result
		}
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		require.NoError(t, json.Unmarshal(badErr, &e), "invalid UTF-8 was served: %s", badErr)
		assert.Equal(t, -32700, e.Code)
		assert.Contains(t, e.Message, "not valid UTF-8")
		assert.Equal(t, "bom", firstText(t, bomResult))
		assert.Equal(t, "after", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "after"})))
	})
}

// TestEdgeStdioInitializesOnce: a second initialize on the stdio
// connection is refused, as over HTTP, and the session keeps what it
// negotiated.
func TestEdgeStdioInitializesOnce(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, demoToolsConfig())
	c := a.connect()
	resp := c.mustRequest("initialize", map[string]any{
		"protocolVersion": "2025-03-26", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "again", "version": "1"},
	})
	require.Empty(t, resp.Result, "a second initialize was served")
	assert.Equal(t, -32600, coreErrorCode(resp.Error))
	assert.Contains(t, string(resp.Error), "once per connection")
	assert.Equal(t, "still", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "still"})))
}

// TestEdgeRepeatedRoutingHeaders: a sessionless request that names two
// methods or two tools in its headers is refused, whichever an intermediary
// would have routed on.
func TestEdgeRepeatedRoutingHeaders(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, demoToolsConfig())
	a.waitLoaded()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, header := range []string{"Mcp-Name", "Mcp-Method"} {
		req, err := http.NewRequest(http.MethodPost, a.url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header = http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"demo_echo"},
		}
		req.Header[header] = append(req.Header[header], "other")
		r := coreDo(t, req)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		m := coreMessage(t, r)
		assert.Equal(t, -32020, coreErrorCode(m.Error), "a malformed mirrored header (2026-07-28)")
		assert.Contains(t, string(m.Error), "the "+header+" header appears 2 times")
	}
}

// TestEdgeHeadersAndBrowserPages: headers far larger than any MCP
// client sends are refused with 431, and a page of an allowed origin can
// use the endpoint from a browser: its CORS preflight is answered and it
// may read the session id of its initialize.
func TestEdgeHeadersAndBrowserPages(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	a := serveConfig(t, httpTransport, demoToolsConfig()+"http:\n  allowed_origins: ['"+app+"']\n")
	a.waitLoaded()

	// Only the status: the server closes the connection with the request
	// unread, and the rest of its plain-text body may be lost to a reset.
	req, err := http.NewRequest(http.MethodPost, a.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Padding", strings.Repeat("p", 100<<10))
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	req, err = http.NewRequest(http.MethodOptions, a.url, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", app)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type, mcp-protocol-version")
	r := coreDo(t, req)
	assert.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	assert.Equal(t, app, r.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "content-type, mcp-protocol-version", r.header.Get("Access-Control-Allow-Headers"))

	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`)
	r = corePost(t, a.url, "", initialize, map[string]string{"Origin": app})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, app, r.header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, r.header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id")
	assert.NotEmpty(t, r.header.Get("Mcp-Session-Id"))
}

// TestEdgeBrowserPageWithAuth: with http.auth, a page of an allowed origin
// gets its CORS preflight answered (a browser sends no credentials with
// one), while the request itself still needs its token, and the page may
// read the refusal; a page of another origin gets no preflight.
func TestEdgeBrowserPageWithAuth(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	token := randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, "version: 1\nhttp:\n  allowed_origins: ['"+app+"']\n  auth: {tokens: {page: {env: PAGE_TOKEN}}}\nservers:\n  demo:\n    truely-stateless: true\n    "+demoServer("tools")+"\n")},
		env:     []string{"PAGE_TOKEN=" + token}})
	a.waitLoaded()

	preflight := func(origin string) coreHTTPReply {
		req, err := http.NewRequest(http.MethodOptions, a.url, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		return coreDo(t, req)
	}
	r := preflight(app)
	assert.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	assert.Equal(t, app, r.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "authorization, content-type", r.header.Get("Access-Control-Allow-Headers"))
	r = preflight("https://evil.example")
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"))

	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`)
	r = corePost(t, a.url, "", initialize, map[string]string{"Origin": app})
	assert.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	assert.Equal(t, app, r.header.Get("Access-Control-Allow-Origin"), "the page may read the refusal")
	r = corePost(t, a.url, "", initialize, map[string]string{"Origin": app, "Authorization": "Bearer " + token})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.NotEmpty(t, r.header.Get("Mcp-Session-Id"))
}
