package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
)

func TestToolsServer(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})

	assert.Equal(t, "tools", inst.Server())
	assert.Equal(t, DefaultProtocol, inst.Protocol())
	assert.NotZero(t, inst.PID())
	names := make([]string, 0, len(inst.Tools()))
	for _, tool := range inst.Tools() {
		names = append(names, tool.Name)
		var head struct {
			Name string `json:"name"`
		}
		require.NoError(t, json.Unmarshal(tool.Raw, &head))
		assert.Equal(t, tool.Name, head.Name, "Raw is the tool's own definition")
	}
	assert.ElementsMatch(t, []string{"echo", "add", "pid", "big", "slow", "fail", "env"}, names)

	tests := []struct {
		name string
		tool string
		args string
		want string
	}{
		{"text", "echo", `{"text":"héllo <&> \"q\""}`, `{"content":[{"type":"text","text":"héllo <&> \"q\""}]}`},
		{"structured", "add", `{"a":2,"b":3.5}`, `{"content":[{"type":"text","text":"5.5"}],"structuredContent":{"sum":5.5}}`},
		{"tool error", "fail", `{"message":"boom"}`, `{"content":[{"type":"text","text":"boom"}],"isError":true}`},
		{"pid", "pid", `{}`, fmt.Sprintf(`{"content":[{"type":"text","text":"%d"}],"structuredContent":{"pid":%d}}`, inst.PID(), inst.PID())},
		{"env overlay", "env", `{"name":"` + demoEnv + `"}`, `{"content":[{"type":"text","text":"tools"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			raw, err := inst.CallTool(ctx, Call{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(raw))
		})
	}

	t.Run("ping", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		require.NoError(t, inst.Ping(ctx))
	})

	t.Run("unknown tool is a JSON-RPC error", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := inst.CallTool(ctx, Call{Name: "no_such_tool", Arguments: json.RawMessage(`{}`)})
		var rpcErr *RPCError
		require.ErrorAs(t, err, &rpcErr)
		assert.NotZero(t, rpcErr.Code)
		assert.Contains(t, rpcErr.Message, "no_such_tool")
	})
}

func TestConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	const calls = 50
	results := make([]json.RawMessage, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("message %d", i)})
			results[i], errs[i] = inst.CallTool(ctx, Call{Name: "echo", Arguments: args})
		}()
	}
	wg.Wait()
	for i := range calls {
		require.NoError(t, errs[i], "call %d", i)
		assert.JSONEq(t, fmt.Sprintf(`{"content":[{"type":"text","text":"message %d"}]}`, i), string(results[i]), "call %d", i)
	}
}

// decodeNumbers decodes JSON keeping every number as written.
func decodeNumbers(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "%s", raw)
	return v
}

func compactJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, raw))
	return b.Bytes()
}

func TestFidelity(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "fidelity", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	t.Run("tools/list follows pagination and keeps every byte", func(t *testing.T) {
		var fixture struct {
			Tools []json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(demo.FidelityFixture("tools.json"), &fixture))
		require.Greater(t, len(fixture.Tools), 2, "the fixture spans several pages")

		tools, err := inst.ListTools(ctx)
		require.NoError(t, err)
		require.Len(t, tools, len(fixture.Tools))
		for i, want := range fixture.Tools {
			assert.Equal(t, decodeNumbers(t, want), decodeNumbers(t, tools[i].Raw), "tool %d", i)
			assert.Equal(t, string(compactJSON(t, want)), string(tools[i].Raw), "tool %d byte for byte", i)
		}
		assert.Equal(t, tools, inst.Tools(), "Start lists the same tools")
	})

	t.Run("a rich result arrives intact", func(t *testing.T) {
		raw, err := inst.CallTool(ctx, Call{Name: "rich"})
		require.NoError(t, err)
		want := demo.FidelityFixture("rich_result.json")
		assert.Equal(t, decodeNumbers(t, want), decodeNumbers(t, raw))
		assert.Equal(t, string(compactJSON(t, want)), string(raw))
	})

	t.Run("a JSON-RPC error arrives intact", func(t *testing.T) {
		_, err := inst.CallTool(ctx, Call{Name: "broken"})
		var rpcErr *RPCError
		require.ErrorAs(t, err, &rpcErr)
		var want struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(demo.FidelityFixture("error.json"), &want))
		assert.Equal(t, want.Code, rpcErr.Code)
		assert.Equal(t, want.Message, rpcErr.Message)
		assert.Equal(t, string(compactJSON(t, want.Data)), string(rpcErr.Data), "data stays raw")
		assert.Contains(t, string(rpcErr.Data), "12345678901234567890", "big integers stay intact")
		assert.Contains(t, rpcErr.Error(), want.Message)
	})

	// Call.Arguments promises the bytes reach the upstream unchanged; the
	// fidelity server echoes what it received.
	t.Run("arguments are forwarded byte for byte", func(t *testing.T) {
		args := `{"big":12345678901234567890,"s":"<&> \u00e9","nested":{"a":[1.50,null]}}`
		raw, err := inst.CallTool(ctx, Call{Name: "kitchen_sink", Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		var res struct {
			Structured struct {
				Arguments json.RawMessage `json:"arguments"`
			} `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(raw, &res))
		assert.Equal(t, args, string(res.Structured.Arguments))
	})
}

// progressLog collects the progress notifications handed to one call.
type progressLog struct {
	mu    sync.Mutex
	items []json.RawMessage
	first chan struct{}
	once  sync.Once
}

func newProgressLog() *progressLog { return &progressLog{first: make(chan struct{})} }

func (l *progressLog) add(params json.RawMessage) {
	l.mu.Lock()
	l.items = append(l.items, append(json.RawMessage(nil), params...))
	l.mu.Unlock()
	l.once.Do(func() { close(l.first) })
}

func (l *progressLog) all() []json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]json.RawMessage(nil), l.items...)
}

func TestProgressIsRetokenedPerCall(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "fidelity", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// Two calls at once with different downstream tokens, one of them a
	// number: each sees exactly its own three notifications under its own token.
	tokens := []string{`"abc"`, `42`}
	logs := make([]*progressLog, len(tokens))
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	for i, token := range tokens {
		logs[i] = newProgressLog()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = inst.CallTool(ctx, Call{
				Name: "progress_then_result", Arguments: json.RawMessage(`{}`),
				ProgressToken: json.RawMessage(token), OnProgress: logs[i].add,
			})
		}()
	}
	wg.Wait()
	for i, token := range tokens {
		require.NoError(t, errs[i])
		got := logs[i].all()
		require.Len(t, got, 3, "token %s", token)
		for step, params := range got {
			var p struct {
				Token    json.RawMessage `json:"progressToken"`
				Progress int             `json:"progress"`
				Total    int             `json:"total"`
				Message  string          `json:"message"`
			}
			require.NoError(t, json.Unmarshal(params, &p))
			assert.Equal(t, token, string(p.Token))
			assert.Equal(t, step+1, p.Progress)
			assert.Equal(t, 3, p.Total)
			assert.Equal(t, fmt.Sprintf("step %d of 3", step+1), p.Message)
		}
	}

	t.Run("no token, no progress", func(t *testing.T) {
		log := newProgressLog()
		_, err := inst.CallTool(ctx, Call{Name: "progress_then_result", OnProgress: log.add})
		require.NoError(t, err)
		assert.Empty(t, log.all())
	})
}

func TestCancellationReachesUpstream(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	marker := filepath.Join(t.TempDir(), "cancelled")
	args, _ := json.Marshal(map[string]any{"seconds": 30, "steps": 300, "marker": marker})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := newProgressLog()
	type outcome struct {
		raw json.RawMessage
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		raw, err := inst.CallTool(ctx, Call{Name: "slow", Arguments: args,
			ProgressToken: json.RawMessage(`"slow-1"`), OnProgress: progress.add})
		done <- outcome{raw, err}
	}()

	select {
	case <-progress.first:
	case <-time.After(waitTimeout):
		t.Fatal("no progress from the slow tool")
	}
	cancelled := time.Now()
	cancel()
	var res outcome
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("CallTool did not return after its context was cancelled")
	}
	assert.Nil(t, res.raw)
	require.ErrorIs(t, res.err, context.Canceled)
	assert.Less(t, time.Since(cancelled), 5*time.Second)

	// The upstream saw notifications/cancelled: the tool wrote its marker.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && string(b) == "cancelled"
	}, waitTimeout, 10*time.Millisecond, "the upstream was never told the call was cancelled")

	// And the instance still serves calls.
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel2()
	_, err := inst.CallTool(ctx2, Call{Name: "echo", Arguments: json.RawMessage(`{"text":"still here"}`)})
	require.NoError(t, err)
}

func TestCallTimeoutIsTheContextsError(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := inst.CallTool(ctx, Call{Name: "slow", Arguments: json.RawMessage(`{"seconds":30}`)})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, errors.Is(err, ErrClosed))
	select {
	case <-inst.Done():
		t.Fatal("a timed-out call must not close the instance")
	default:
	}
}

func TestRetoken(t *testing.T) {
	tests := []struct {
		name   string
		params string
		token  string
		want   string
	}{
		{"string token", `{"progressToken":"agg-1","progress":1,"total":3,"message":"m"}`, `"abc"`, `{"progressToken":"abc","progress":1,"total":3,"message":"m"}`},
		{"number token", `{"progressToken":"agg-7","progress":0.5}`, `12345678901234567890`, `{"progressToken":12345678901234567890,"progress":0.5}`},
		{"extra members kept", `{"progressToken":"agg-1","progress":2,"x-extra":{"big":9007199254740993}}`, `"t"`, `{"progressToken":"t","progress":2,"x-extra":{"big":9007199254740993}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := retoken(json.RawMessage(tc.params), json.RawMessage(tc.token))
			assert.Equal(t, decodeNumbers(t, []byte(tc.want)), decodeNumbers(t, got))
		})
	}
	t.Run("not an object is passed through", func(t *testing.T) {
		assert.Equal(t, `[1]`, string(retoken(json.RawMessage(`[1]`), json.RawMessage(`"t"`))))
	})
}
