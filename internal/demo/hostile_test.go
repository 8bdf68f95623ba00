package demo

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMisbehaveFlood(t *testing.T) {
	c := start(t, "misbehave", "flood")
	c.initialize("2025-11-25")
	assert.Equal(t, []string{"flood", "progress", "stats"}, toolNames(t, c.mustCall("tools/list", nil)))

	// Drain the flood while it lasts; the reader would block on a full channel.
	drained := make(chan int)
	stop := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case m := <-c.notifications:
				if m.Method == "notifications/tools/list_changed" {
					n++
				}
			case <-stop:
				// The reader queued every notification before the result;
				// what is still buffered counts too.
				for {
					select {
					case m := <-c.notifications:
						if m.Method == "notifications/tools/list_changed" {
							n++
						}
					default:
						drained <- n
						return
					}
				}
			}
		}
	}()
	_, flood := c.request("tools/call", map[string]any{"name": "flood", "arguments": map[string]any{"seconds": 0.2, "changing": true}})
	// Requests are answered during the flood; with changing, every list
	// offers a new tool.
	assert.Equal(t, []string{"flood", "progress", "stats", "gen_2"}, toolNames(t, c.mustCall("tools/list", nil)))
	r := c.await(flood)
	require.Nil(t, r.err)
	close(stop)
	received := <-drained

	var sent struct {
		Structured struct {
			Sent int `json:"sent"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(r.result, &sent))
	assert.Positive(t, sent.Structured.Sent)
	assert.Equal(t, sent.Structured.Sent, received, "every notification precedes the flood's result")

	stats := c.callTool("stats", nil)
	assert.Equal(t, json.Number("2"), stats.StructuredContent["lists"])
	assert.Equal(t, json.Number(itoa(sent.Structured.Sent)), stats.StructuredContent["sent"])
	assert.Equal(t, json.Number("2"), stats.StructuredContent["gen"])
	require.NoError(t, c.stop())
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestMisbehaveFloodProgress(t *testing.T) {
	c := start(t, "misbehave", "flood")
	c.initialize("2025-11-25")
	r := c.mustCall("tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"count": 3, "bytes": 100, "interval_ms": 1},
		"_meta": map[string]any{"progressToken": "p"}})
	for i := 1; i <= 3; i++ {
		n := c.nextNotification()
		require.Equal(t, "notifications/progress", n.Method)
		p := decodeMap(t, n.Params)
		assert.Equal(t, "p", p["progressToken"])
		assert.Equal(t, json.Number(itoa(i)), p["progress"])
		assert.Len(t, p["message"], 100)
	}
	assert.Equal(t, json.Number("3"), decodeToolResult(t, r).StructuredContent["sent"])
	require.NoError(t, c.stop())
}
