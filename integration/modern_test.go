package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modernVersion is the sessionless protocol generation.
const modernVersion = "2026-07-28"

// modernMeta is the _meta envelope of a sessionless (2026-07-28) request:
// the version, the client's capabilities and its info.
func modernMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "modern-test", "version": "1.0.0"},
	}
}

// modernPost sends one sessionless (2026-07-28) request: no session, the
// version in a header and in _meta, the method and name in headers.
func modernPost(ctx context.Context, url, method, name string, params map[string]any) (*http.Response, error) {
	return modernPostAs(ctx, url, "", method, name, params)
}

// modernPostAs is modernPost as the client holding token ("": none).
func modernPostAs(ctx context.Context, url, token, method, name string, params map[string]any) (*http.Response, error) {
	return modernPostVia(ctx, http.DefaultClient, url, token, method, name, params)
}

// modernPostVia is modernPostAs sent with hc.
func modernPostVia(ctx context.Context, hc *http.Client, url, token, method, name string, params map[string]any) (*http.Response, error) {
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	maps.Copy(meta, modernMeta())
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := newModernRequest(ctx, url, token, method, name, body)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}

// newModernRequest is the POST of a 2026-07-28 request, body, with the
// headers of its generation, the method and name ("": none) it names, and
// the bearer token ("": none).
func newModernRequest(ctx context.Context, url, token, method, name string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// modernCall calls a tool sessionlessly and returns its result's structuredContent.value.
func modernCall(t *testing.T, url, tool, lease string) int {
	t.Helper()
	return modernCallAs(t, url, "", tool, lease)
}

// modernCallAs calls a tool sessionlessly as the client holding token
// ("": none), within the conversation lease ("": the anonymous one), and
// returns the result's structuredContent.value.
func modernCallAs(t *testing.T, url, token, tool, lease string) int {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": map[string]any{}}
	if lease != "" {
		params["_meta"] = map[string]any{"mcp-aggregator/lease": lease}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := modernPostAs(ctx, url, token, "tools/call", tool, params)
	require.NoError(t, err)
	raw, data := readReply(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	msg := decodeValueReply(t, data)
	require.Empty(t, msg.Error, "%s", data)
	return msg.Result.Structured.Value
}

// valueReply is a JSON-RPC response to a call of a tool whose result's
// structuredContent has a value (the demo counter's).
type valueReply struct {
	ID     json.RawMessage `json:"id"`
	Result struct {
		Structured struct {
			Value int `json:"value"`
		} `json:"structuredContent"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

// decodeValueReply decodes data, a valueReply.
func decodeValueReply(t *testing.T, data []byte) valueReply {
	t.Helper()
	var msg valueReply
	require.NoError(t, json.Unmarshal(data, &msg), "%s", data)
	return msg
}

// TestModernSessionlessLeases: sessionless clients name their conversation
// with the _meta key mcp-aggregator/lease; each name gets its own instance,
// and calls without one share the anonymous lease, with one warning.
func TestModernSessionlessLeases(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, "version: 1\nservers:\n"+demoEntry("counter", "c_", "counter"))
	a.waitLoaded()
	assert.Equal(t, 1, modernCall(t, a.url, "c_increment", "conv-a"))
	assert.Equal(t, 2, modernCall(t, a.url, "c_increment", "conv-a"))
	assert.Equal(t, 1, modernCall(t, a.url, "c_increment", "conv-b"), "another conversation has its own instance")
	assert.Equal(t, 3, modernCall(t, a.url, "c_increment", "conv-a"))
	assert.Equal(t, 1, modernCall(t, a.url, "c_increment", ""))
	assert.Equal(t, 2, modernCall(t, a.url, "c_increment", ""), "calls without a lease key share one anonymous lease")
	assert.Equal(t, 1, strings.Count(a.log.String(), "without a lease key"), "the anonymous lease is reported once")
}

// TestModernSessionlessLeasesOverStdio: over stdio too, sessionless requests keep
// their conversation's instance from call to call (named in _meta, or the anonymous
// one), though the connection initialized no session.
func TestModernSessionlessLeasesOverStdio(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+demoEntry("counter", "c_", "counter"))
	a.waitLoaded()
	lines := bufio.NewReader(a.stdout)
	id := 0
	call := func(lease string) int {
		t.Helper()
		id++
		meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
		if lease != "" {
			meta["mcp-aggregator/lease"] = lease
		}
		req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": "c_increment", "arguments": map[string]any{}, "_meta": meta}})
		require.NoError(t, err)
		_, err = a.stdin.Write(append(req, '\n'))
		require.NoError(t, err)
		for {
			line, err := lines.ReadBytes('\n')
			require.NoError(t, err)
			msg := decodeValueReply(t, line)
			if string(msg.ID) != fmt.Sprint(id) {
				continue // not the answer (none other is expected, but a notification may come)
			}
			require.Empty(t, msg.Error, "%s", line)
			return msg.Result.Structured.Value
		}
	}
	assert.Equal(t, 1, call("conv-a"))
	assert.Equal(t, 2, call("conv-a"), "the conversation keeps its instance")
	assert.Equal(t, 1, call("conv-b"), "another conversation has its own instance")
	assert.Equal(t, 1, call(""))
	assert.Equal(t, 2, call(""), "calls without a lease key share one anonymous lease")
	assert.Equal(t, 3, call("conv-a"))
}

// listenToolsChanged opens a sessionless subscriptions/listen stream at url
// for tools/list_changed, open until ctx ends, and returns the data of its
// events, closed when the stream ends.
func listenToolsChanged(t *testing.T, ctx context.Context, url string) <-chan string {
	t.Helper()
	resp, err := modernPost(ctx, url, "subscriptions/listen", "",
		map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := make(chan string, 16)
	go func() {
		defer close(events)
		_ = readSSE(resp.Body, func(d []byte) bool { events <- string(d); return true })
	}()
	return events
}

// TestModernListenerGetsListChanged: a 2026-07-28 client's subscriptions/listen
// stream receives tools/list_changed when a reload changes the catalog.
func TestModernListenerGetsListChanged(t *testing.T) {
	t.Parallel()
	r := newReloadRig(t, httpTransport, reloadConfig("pid"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := listenToolsChanged(t, ctx, r.a.url)
	// The stream is open once the server acknowledged the subscription.
	select {
	case ack, ok := <-events:
		require.True(t, ok, "the listen stream closed")
		require.Contains(t, ack, "notifications/subscriptions/acknowledged", "the first event acknowledges the subscription")
		require.Contains(t, ack, `"toolsListChanged":true`)
	case <-ctx.Done():
	}

	r.save(reloadConfig("pid, echo"))
	r.waitReload()
	deadline := time.After(reloadWait)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the listen stream ended without tools/list_changed")
			if strings.Contains(ev, "notifications/tools/list_changed") {
				return
			}
		case <-deadline:
			t.Fatalf("no tools/list_changed on the listen stream within %s", reloadWait)
		}
	}
}
