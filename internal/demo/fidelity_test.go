package demo

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFidelityFixtures(t *testing.T) {
	for _, name := range []string{"tools.json", "rich_result.json", "error.json"} {
		b := FidelityFixture(name)
		require.NotEmpty(t, b, name)
		require.True(t, json.Valid(b), name)
	}
	assert.Nil(t, FidelityFixture("missing.json"))
	assert.Nil(t, FidelityFixture("../fidelity/tools.json"))

	var doc struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(FidelityFixture("tools.json"), &doc))
	require.GreaterOrEqual(t, len(doc.Tools), 5)
	names := map[string]bool{}
	for _, tool := range doc.Tools {
		var name string
		require.NoError(t, json.Unmarshal(tool["name"], &name))
		names[name] = true
	}
	for _, want := range []string{"rich", "broken", "add_tool", "progress_then_result", "no_annotations", "empty_schema"} {
		assert.True(t, names[want], "tools.json lacks %s", want)
	}
	assert.Contains(t, string(FidelityFixture("tools.json")), "123456789012345678901234567890")
	assert.Contains(t, string(FidelityFixture("tools.json")), "9007199254740993")
}

// listAll follows tools/list pagination and returns each page's raw tools.
func listAll(t *testing.T, c *testClient) (tools []json.RawMessage, pages int) {
	t.Helper()
	var params map[string]any
	for {
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal(c.mustCall("tools/list", params), &page))
		require.LessOrEqual(t, len(page.Tools), fidelityPageSize)
		tools = append(tools, page.Tools...)
		pages++
		if page.NextCursor == nil {
			return tools, pages
		}
		require.NotEmpty(t, *page.NextCursor)
		params = map[string]any{"cursor": *page.NextCursor}
	}
}

func TestFidelityServer(t *testing.T) {
	c := start(t, "fidelity")
	init := c.initialize("2099-01-01")
	assert.Equal(t, map[string]any{
		"protocolVersion": "2099-01-01",
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
		"serverInfo":      map[string]any{"name": "demo-fidelity", "version": "1.0.0"},
	}, init)
	assert.JSONEq(t, `{}`, string(c.mustCall("ping", nil)))

	// Pages concatenated equal the fixture's tools, token for token.
	var doc struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(FidelityFixture("tools.json"), &doc))
	tools, pages := listAll(t, c)
	assert.Equal(t, (len(doc.Tools)+fidelityPageSize-1)/fidelityPageSize, pages)
	require.Len(t, tools, len(doc.Tools))
	assert.Equal(t, decodeAny(t, FidelityFixture("tools.json")).(map[string]any)["tools"], decodeAny(t, mustMarshal(t, tools)))
	for i := range tools {
		want, err := compact(doc.Tools[i])
		require.NoError(t, err)
		assert.Equal(t, string(want), string(tools[i]), "tool %d is not byte-identical", i)
	}
	for _, tool := range tools {
		m := decodeMap(t, tool)
		if m["name"] == "no_annotations" {
			assert.NotContains(t, m, "annotations")
		}
	}

	// rich returns the fixture exactly.
	r := c.call("tools/call", map[string]any{"name": "rich", "arguments": map[string]any{}})
	require.Nil(t, r.err)
	assert.Equal(t, decodeAny(t, FidelityFixture("rich_result.json")), decodeAny(t, r.result))
	want, err := compact(FidelityFixture("rich_result.json"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(r.result))

	// broken fails with the fixture's error object.
	r = c.call("tools/call", map[string]any{"name": "broken"})
	require.NotNil(t, r.err)
	assert.Equal(t, -32042, r.err.Code)
	assert.Equal(t, decodeAny(t, FidelityFixture("error.json")), decodeAny(t, r.rawErr))

	// Other tools echo their arguments exactly, big integers included.
	args := `{"origin":{"x":1,"y":2.50},"huge":123456789012345678901234567890,"label":"<a&b>"}`
	c.sendLine([]byte(`{"jsonrpc":"2.0","id":"echo-1","method":"tools/call","params":{"name":"kitchen_sink","arguments":` + args + `}}`))
	// The id is a string this client did not allocate, so it lands in unmatched.
	echo := c.nextUnmatched()
	assert.Equal(t, `"echo-1"`, string(echo.ID))
	res := decodeToolResult(t, echo.Result)
	assert.Equal(t, args, res.Content[0].Text)
	assert.Contains(t, string(echo.Result), `"structuredContent":{"arguments":`+args+`}`)

	// progress_then_result sends three notifications with the raw token.
	for _, token := range []string{`"tok-1"`, `9007199254740993`} {
		res := c.mustCall("tools/call", map[string]any{
			"name":  "progress_then_result",
			"_meta": map[string]any{"progressToken": json.RawMessage(token)},
		})
		assert.JSONEq(t, `{"content":[{"type":"text","text":"ok"}]}`, string(res))
		for i := 1; i <= 3; i++ {
			n := c.nextNotification()
			require.Equal(t, "notifications/progress", n.Method)
			assert.Contains(t, string(n.Params), `"progressToken":`+token)
			p := decodeMap(t, n.Params)
			assert.Equal(t, json.Number(string(rune('0'+i))), p["progress"])
			assert.Equal(t, json.Number("3"), p["total"])
		}
	}
	res2 := c.mustCall("tools/call", map[string]any{"name": "progress_then_result"})
	assert.JSONEq(t, `{"content":[{"type":"text","text":"ok"}]}`, string(res2))
	require.Empty(t, c.notifications)

	// add_tool grows the list and announces it.
	for _, name := range []string{"added_1", "added_2"} {
		res := c.callTool("add_tool", nil)
		assert.Equal(t, "added "+name, res.Content[0].Text)
		assert.Equal(t, "notifications/tools/list_changed", c.nextNotification().Method)
	}
	tools, _ = listAll(t, c)
	require.Len(t, tools, len(doc.Tools)+2)
	assert.Equal(t, "added_2", decodeMap(t, tools[len(tools)-1])["name"])
	assert.Equal(t, "{}", c.callTool("added_1", nil).Content[0].Text)

	// Errors.
	r = c.call("tools/call", map[string]any{"name": "nope"})
	require.NotNil(t, r.err)
	assert.Equal(t, codeInvalidParams, r.err.Code)
	r = c.call("resources/list", nil)
	require.NotNil(t, r.err)
	assert.Equal(t, codeMethodNotFound, r.err.Code)
	r = c.call("tools/list", map[string]any{"cursor": "not-a-cursor"})
	require.NotNil(t, r.err)
	assert.Equal(t, codeInvalidParams, r.err.Code)
	c.sendLine([]byte(`{not json`))
	parseErr := c.nextUnmatched()
	assert.Equal(t, "null", string(parseErr.ID))
	assert.Contains(t, string(parseErr.Error), "-32700")
}

func TestFidelityHugeInputLine(t *testing.T) {
	c := start(t, "fidelity")
	c.initialize("2025-06-18")
	text := strings.Repeat("x", 3<<20)
	res := c.callTool("no_annotations", map[string]any{"value": text})
	require.Len(t, res.Content, 1)
	assert.Equal(t, len(text)+len(`{"value":""}`), len(res.Content[0].Text))
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}
