package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A message larger than the pipe goes out in parts, as the upstream reads,
// while other callers wait for the write slot. Such messages, from several
// callers at once, must still arrive whole and framed.
func TestWritesLargerThanThePipeArriveWhole(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 256 KiB and more: four pipes' worth, a different size per caller.
			text := strings.Repeat(string(rune('a'+i)), 1<<18+i*4099)
			raw, err := inst.CallTool(ctx, Call{Name: "echo", Arguments: json.RawMessage(`{"text":"` + text + `"}`)})
			if !assert.NoError(t, err) {
				return
			}
			var res struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if !assert.NoError(t, json.Unmarshal(raw, &res)) || !assert.Len(t, res.Content, 1) {
				return
			}
			assert.True(t, res.Content[0].Text == text, "caller %d got its own text back whole", i)
		}()
	}
	wg.Wait()
}
