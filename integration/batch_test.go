package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batchClient speaks raw JSON-RPC to the aggregator, one message or one
// batch at a time, and returns what answers it: a JSON object, a JSON
// array, or nil when nothing is due.
type batchClient struct {
	t       *testing.T
	a       *aggregator
	out     *bufio.Reader // stdio: the aggregator's stdout
	session string        // HTTP: the session's id
	version string
}

func newBatchClient(t *testing.T, a *aggregator, version string) *batchClient {
	return newBatchClientWith(t, a, version, "{}")
}

// newBatchClientWith is newBatchClient declaring capabilities (JSON).
func newBatchClientWith(t *testing.T, a *aggregator, version, capabilities string) *batchClient {
	c := &batchClient{t: t, a: a, version: version}
	if a.transport == stdioTransport {
		c.out = bufio.NewReader(a.stdout)
	}
	init := c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"batch","version":"1"}}}`, version, capabilities), true)
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(init, &res), "%s", init)
	require.Equal(t, version, res.Result.ProtocolVersion)
	require.Nil(t, c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false))
	return c
}

// send sends body and returns its answer; answered says whether one is due
// (over stdio nothing else tells).
func (c *batchClient) send(body string, answered bool) json.RawMessage {
	c.t.Helper()
	if c.out != nil {
		_, err := io.WriteString(c.a.stdin, body+"\n")
		require.NoError(c.t, err)
		if !answered {
			return nil
		}
		for {
			line, err := c.out.ReadBytes('\n')
			require.NoError(c.t, err)
			var probe struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			// A notification the aggregator sends on its own is not an answer.
			if line[0] == '{' && json.Unmarshal(line, &probe) == nil && probe.Method != "" && probe.ID == nil {
				continue
			}
			return bytes.TrimSpace(line)
		}
	}
	req, err := http.NewRequest(http.MethodPost, c.a.url, strings.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); c.session == "" {
		c.session = id
	}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	if !answered {
		require.Equal(c.t, http.StatusAccepted, resp.StatusCode, "%s", raw)
		return nil
	}
	require.Contains(c.t, resp.Header.Get("Content-Type"), "application/json", "%s", raw)
	return bytes.TrimSpace(raw)
}

// batchReply is one member of a batch's answer.
type batchReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestJSONRPCBatches: a client of protocol 2025-03-26, which MCP requires
// to be able to send JSON-RPC batches, gets each request of a batch
// answered as it would be alone, in one array, and a batch's bad members
// answered in it; a client of any other version, and a batch that breaks
// the rules as a whole, get one error naming why.
func TestJSONRPCBatches(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, fmt.Sprintf(`version: 1
servers:
  demo:
    %s
`, demoServer("tools")))
		a.waitLoaded()
		c := newBatchClient(t, a, "2025-03-26")

		// Each request alone first, for what the batch must answer alike.
		var list struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"result"`
		}
		listAlone := c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, true)
		require.NoError(t, json.Unmarshal(listAlone, &list))
		echo := ""
		for _, tool := range list.Result.Tools {
			if strings.HasSuffix(tool.Name, "echo") {
				echo = tool.Name
			}
		}
		require.NotEmpty(t, echo, "%s", listAlone)
		// The first call of a session carries a note on its lease; the second is the one to match.
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":%q,"arguments":{"text":"first"}}}`, echo), true)
		callAlone := c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":%q,"arguments":{"text":"batched"}}}`, echo), true)
		alone := map[string]batchReply{}
		for _, raw := range []json.RawMessage{listAlone, callAlone} {
			var r batchReply
			require.NoError(t, json.Unmarshal(raw, &r))
			alone[string(r.ID)] = r
		}

		answer := c.send(strings.ReplaceAll(fmt.Sprintf(`[
 {"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":%q,"arguments":{"text":"batched"}}},
 {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}},
 {"jsonrpc":"2.0","id":11,"method":"tools/list"},
 {"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}},
 {"jsonrpc":"1.0","id":13,"method":"ping"},
 {"jsonrpc":"2.0","id":"fourteen","method":"ping"}
]`, echo), "\n", ""), true) // stdio frames a message as one line
		var replies []batchReply
		require.NoError(t, json.Unmarshal(answer, &replies), "a batch is answered with an array: %s", answer)
		byID := map[string]batchReply{}
		for _, r := range replies {
			byID[string(r.ID)] = r
		}
		require.Len(t, byID, 5, "one answer per request, none for the notification: %s", answer)
		assert.JSONEq(t, string(alone["3"].Result), string(byID["10"].Result), "a call in a batch is answered as alone")
		assert.JSONEq(t, string(alone["2"].Result), string(byID["11"].Result), "a list in a batch is answered as alone")
		if assert.NotNil(t, byID["12"].Error) {
			assert.Equal(t, -32600, byID["12"].Error.Code)
			assert.Contains(t, byID["12"].Error.Message, "initialize may not be part of a JSON-RPC batch")
		}
		if assert.NotNil(t, byID["13"].Error) {
			assert.Equal(t, -32600, byID["13"].Error.Code)
		}
		assert.JSONEq(t, `{}`, string(byID[`"fourteen"`].Result))

		// Notifications alone get nothing; the ping after gets its own answer.
		assert.Nil(t, c.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`, false))
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":20,"result":{}}`, string(c.send(`{"jsonrpc":"2.0","id":20,"method":"ping"}`, true)))

		// Whole batches that break the rules get one error, not an array.
		pings := make([]string, 101)
		for i := range pings {
			pings[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i)
		}
		for body, want := range map[string]string{
			`[]`:                                 "an empty batch",
			"[" + strings.Join(pings, ",") + "]": "a batch of 101 messages exceeds the limit of 100",
		} {
			var r batchReply
			raw := c.send(body, true)
			require.NoError(t, json.Unmarshal(raw, &r), "one error object: %s", raw)
			if assert.NotNil(t, r.Error, "%s", raw) {
				assert.Equal(t, -32600, r.Error.Code)
				assert.Contains(t, r.Error.Message, want)
			}
		}

		// Another protocol version has no batches.
		other := a
		if tr == stdioTransport {
			other = serveConfig(t, tr, fmt.Sprintf("version: 1\nservers:\n  demo:\n    %s\n", demoServer("tools")))
		}
		c2 := newBatchClient(t, other, "2025-11-25")
		var r batchReply
		raw := c2.send(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, true)
		require.NoError(t, json.Unmarshal(raw, &r), "one error object: %s", raw)
		if assert.NotNil(t, r.Error, "%s", raw) {
			assert.Equal(t, -32600, r.Error.Code)
			assert.Contains(t, r.Error.Message, "JSON-RPC batches are part of MCP protocol 2025-03-26 only, and this session speaks 2025-11-25")
		}
	})
}
