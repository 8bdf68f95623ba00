package demo

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeExit replaces exitProcess for the duration of a test and returns a
// function reporting the codes it was called with.
func fakeExit(t *testing.T) func() []int {
	var mu sync.Mutex
	var codes []int
	orig := exitProcess
	exitProcess = func(code int) {
		mu.Lock()
		defer mu.Unlock()
		codes = append(codes, code)
	}
	t.Cleanup(func() { exitProcess = orig })
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), codes...)
	}
}

func TestMisbehaveNoise(t *testing.T) {
	c := start(t, "misbehave", "noise")
	init := c.initialize("2025-06-18")
	assert.Equal(t, "demo-misbehave", init["serverInfo"].(map[string]any)["name"])
	assert.Equal(t, []string{"ping_tool"}, toolNames(t, c.mustCall("tools/list", nil)))
	assert.Equal(t, "pong", c.callTool("ping_tool", nil).Content[0].Text)
	// Two garbage lines precede each of the three responses.
	require.Len(t, c.garbage, 6)
	assert.Equal(t, "this is not json\n", <-c.garbage)
	assert.Equal(t, "{\"jsonrpc\":\n", <-c.garbage)
}

func TestMisbehaveUnknownID(t *testing.T) {
	c := start(t, "misbehave", "unknown-id")
	c.initialize("2025-06-18")
	assert.Equal(t, "pong", c.callTool("ping_tool", nil).Content[0].Text)
	require.Len(t, c.unmatched, 2)
	assert.Equal(t, `"unsolicited-1"`, string(c.nextUnmatched().ID))
	assert.Equal(t, `"unsolicited-2"`, string(c.nextUnmatched().ID))
}

func TestMisbehaveHugeLine(t *testing.T) {
	c := start(t, "misbehave", "huge-line")
	c.initialize("2025-06-18")
	r := c.callTool("ping_tool", nil)
	require.Len(t, r.Content, 1)
	assert.Len(t, r.Content[0].Text, hugeLineBytes)
	assert.Equal(t, pattern(64), r.Content[0].Text[:64])
}

func TestMisbehaveHangInit(t *testing.T) {
	c := start(t, "misbehave", "hang-init")
	_, initReply := c.request("initialize", map[string]any{"protocolVersion": "2025-06-18"})
	// Requests are answered in order, so once ping is answered initialize
	// never will be.
	c.mustCall("ping", nil)
	require.Empty(t, initReply)
	require.NoError(t, c.stop())
}

func TestMisbehaveExitInit(t *testing.T) {
	codes := fakeExit(t)
	c := start(t, "misbehave", "exit-init")
	_, initReply := c.request("initialize", map[string]any{"protocolVersion": "2025-06-18"})
	c.mustCall("ping", nil)
	require.Empty(t, initReply)
	assert.Equal(t, []int{3}, codes())
	assert.Contains(t, c.stderr.String(), "exiting during initialize")
}

func TestMisbehaveCrashAfter(t *testing.T) {
	codes := fakeExit(t)
	c := start(t, "misbehave", "crash-after", "2")
	c.initialize("2025-06-18")
	assert.Equal(t, "pong", c.callTool("ping_tool", nil).Content[0].Text)
	assert.Empty(t, codes())
	_, second := c.request("tools/call", map[string]any{"name": "ping_tool"})
	c.mustCall("ping", nil)
	require.Empty(t, second)
	assert.Equal(t, []int{1}, codes())
}

func TestMisbehaveHugeLineIDLast(t *testing.T) {
	c := start(t, "misbehave", "huge-line-id-last")
	c.initialize("2025-06-18")
	r := c.call("tools/call", map[string]any{"name": "ping_tool"})
	require.Nil(t, r.err)
	assert.Len(t, decodeToolResult(t, r.result).Content[0].Text, hugeLineBytes)
}

func TestMisbehaveHugeLineIDLastWritesTheIDLast(t *testing.T) {
	var out lockedBuffer
	s := &misbehaveServer{mode: "huge-line-id-last", conn: &lineConn{out: &out}}
	require.NoError(t, s.handle([]byte(`{"jsonrpc":"2.0","id":"last-1","method":"tools/call","params":{"name":"ping_tool"}}`)))
	line := out.String()
	assert.True(t, strings.HasPrefix(line, `{"result":{"content":[`), "the result comes first")
	assert.True(t, strings.HasSuffix(line, `,"jsonrpc":"2.0","id":"last-1"}`+"\n"), "the id comes last")
}

func TestMisbehavePingFlood(t *testing.T) {
	c := start(t, "misbehave", "ping-flood", "3")
	c.initialize("2025-06-18")
	_, result := c.request("tools/call", map[string]any{"name": "ping_tool"})
	for i := 1; i <= 3; i++ {
		m := c.nextNotification()
		assert.Equal(t, "ping", m.Method)
		assert.Equal(t, `"flood-`+strconv.Itoa(i)+`"`, string(m.ID))
	}
	r := c.await(result)
	require.Nil(t, r.err)
	assert.Equal(t, "pong", decodeToolResult(t, r.result).Content[0].Text)
}

func TestMisbehaveLongStderrLine(t *testing.T) {
	c := start(t, "misbehave", "long-stderr-line")
	c.initialize("2025-06-18")
	first, rest, ok := strings.Cut(c.stderr.String(), "\n")
	require.True(t, ok)
	assert.Equal(t, pattern(hugeLineBytes), first)
	assert.Equal(t, "long line written\n", rest)
}

func TestMisbehaveInitVersion(t *testing.T) {
	c := start(t, "misbehave", "init-version", "1999-01-01")
	init := c.initialize("2025-06-18")
	assert.Equal(t, "1999-01-01", init["protocolVersion"])
	assert.Equal(t, "pong", c.callTool("ping_tool", nil).Content[0].Text)

	err := Run(t.Context(), "misbehave", []string{"init-version"}, strings.NewReader(""), io.Discard, nil)
	assert.ErrorContains(t, err, "init-version needs a protocol version")
}

func TestMisbehaveCursorCycle(t *testing.T) {
	c := start(t, "misbehave", "cursor-cycle")
	c.initialize("2025-06-18")
	var cursors []string
	var params any
	for range 4 {
		var page struct {
			NextCursor string `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal(c.mustCall("tools/list", params), &page))
		cursors = append(cursors, page.NextCursor)
		params = map[string]any{"cursor": page.NextCursor}
	}
	assert.Equal(t, []string{"a", "b", "a", "b"}, cursors)
}

func TestMisbehaveMalformedAnswers(t *testing.T) {
	for mode, want := range map[string]string{
		"null-result":  `null`,
		"array-result": `[{"type":"text","text":"pong"}]`,
		"string-id":    `{"content":[{"type":"text","text":"pong"}]}`,
	} {
		t.Run(mode, func(t *testing.T) {
			c := start(t, "misbehave", mode)
			c.initialize("2025-06-18")
			if mode == "string-id" {
				// The answer's id is the one sent, in quotes: it finds no request.
				id, _ := c.request("tools/call", map[string]any{"name": "ping_tool"})
				m := c.nextUnmatched()
				assert.Equal(t, strconv.Quote(strconv.Itoa(id)), string(m.ID))
				assert.JSONEq(t, want, string(m.Result))
				return
			}
			r := c.call("tools/call", map[string]any{"name": "ping_tool"})
			require.Nil(t, r.err)
			assert.JSONEq(t, want, string(r.result))
		})
	}
}

func TestMisbehaveBOM(t *testing.T) {
	c := start(t, "misbehave", "bom")
	c.request("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}})
	select {
	case line := <-c.garbage:
		assert.True(t, strings.HasPrefix(line, "\uFEFF{"), "first line %q", line)
	case <-time.After(waitTimeout):
		t.Fatal("no first line")
	}
	// Only the first line has the mark.
	assert.Equal(t, []string{"ping_tool"}, toolNames(t, c.mustCall("tools/list", nil)))
}

func TestMisbehaveBadSchemas(t *testing.T) {
	c := start(t, "misbehave", "bad-schemas")
	c.initialize("2025-06-18")
	assert.Equal(t, []string{"ping_tool", "no_schema", "array_schema"}, toolNames(t, c.mustCall("tools/list", nil)))
}
