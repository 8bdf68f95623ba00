package upstream

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

func TestOversizedResponseFailsItsCallAtOnce(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	for _, spec := range []string{"misbehave huge-line", "misbehave huge-line-id-last"} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			rec := newLogRecorder()
			inst := startDemo(t, spec, Options{Logger: rec.Logger(), MaxMessage: limit})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			began := time.Now()
			_, err := inst.CallTool(ctx, Call{Name: "ping_tool", Arguments: json.RawMessage(`{}`)})
			require.Error(t, err)
			assert.NoError(t, ctx.Err(), "the call failed before its deadline")
			assert.Less(t, time.Since(began), 5*time.Second)

			var tooLong *jsonrpc.TooLongError
			require.ErrorAs(t, err, &tooLong)
			m := regexp.MustCompile(`^server "misbehave": its response of (\d+) bytes exceeds the limit of (\d+) bytes$`).FindStringSubmatch(err.Error())
			require.NotNil(t, m, "error %q", err)
			size, _ := strconv.Atoi(m[1])
			assert.Greater(t, size, 8<<20, "the size is the whole response's")
			assert.Equal(t, strconv.Itoa(limit), m[2])
			assert.False(t, rec.Has("over the size limit"), "the response found its call; nothing to log")

			require.NoError(t, inst.Ping(ctx), "the instance still serves")
		})
	}
}

func TestOversizedMessageWithoutACallIsLogged(t *testing.T) {
	filler := strings.Repeat("x", 8<<10)
	tests := []struct {
		name string
		line string
	}{
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + filler + `"}}`},
		{"an id nobody waits for", `{"jsonrpc":"2.0","id":99,"result":{"text":"` + filler + `"}}`},
		{"an id in the middle", `{"jsonrpc":"2.0","result":{"a":"` + filler + `"},"id":1,"more":{"b":"` + filler + `"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newLogRecorder()
			waiting := make(chan reply, 1)
			c := &stdioConn{server: "big", log: rec.Logger(), pending: map[int64]waiter{1: {ch: waiting}}}
			r := jsonrpc.NewReader(strings.NewReader(tc.line+"\n"), 4<<10)
			_, err := r.Read()
			var tooLong *jsonrpc.TooLongError
			require.ErrorAs(t, err, &tooLong)
			c.oversized(tooLong)
			line := rec.WaitFor(t, "over the size limit")
			assert.Contains(t, line, "server=big")
			assert.Contains(t, line, "limit=4096")
			assert.Len(t, waiting, 0, "no call is failed for a message that cannot be tied to it")
		})
	}
}
