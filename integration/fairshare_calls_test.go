package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFairShareCallsPerClient: one http.auth client running more slow
// calls than limits.max_concurrent holds only its share of the slots
// (half by default, --max-calls-per-client), so another client's echo
// runs while all of the first client's calls are still under way, rather
// than after the first of them ends.
func TestFairShareCallsPerClient(t *testing.T) {
	t.Parallel()
	alice, bob := randomToken(t), randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf(`version: 1
limits: {max_concurrent: 4}
http: {auth: {tokens: {alice: {env: ALICE_TOKEN}, bob: {env: BOB_TOKEN}}}}
servers:
  demo:
    truely-stateless: true
    %s
`, demoServer("tools")))},
		env: []string{"ALICE_TOKEN=" + alice, "BOB_TOKEN=" + bob},
	})
	a.waitLoaded()

	// Alice starts more slow calls than there are slots; each reports
	// progress every tenth of a second once it runs upstream.
	const slowCalls = 6
	busy := a.connectAs(alice)
	ctx, stopSlow := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stopSlow() // the client gives up its calls, and the upstream's end
		wg.Wait()
	})
	for i := range slowCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = busy.request(ctx, busy.newID(), "tools/call", map[string]any{
				"name": "slow", "arguments": map[string]any{"seconds": 600, "steps": 6000},
				"_meta": map[string]any{"progressToken": fmt.Sprintf("slow-%d", i)},
			})
		}()
	}
	// Wait until as many of her calls run as the slots she may hold.
	running := func(want int) {
		t.Helper()
		_, ok := busy.waitNotification(func(notification) bool {
			seen := map[string]bool{}
			notes, _ := busy.inbox.snapshot()
			for _, n := range notes {
				var p struct {
					Token string `json:"progressToken"`
				}
				if n.Method == "notifications/progress" && json.Unmarshal(n.Params, &p) == nil && strings.HasPrefix(p.Token, "slow-") {
					seen[p.Token] = true
				}
			}
			return len(seen) >= want
		}, callTimeout)
		require.True(t, ok, "%d of alice's slow calls never ran; stderr:\n%s", want, a.log)
	}
	running(2)

	// Bob's echo starts while every call of alice's is still under way:
	// her slow calls last ten minutes, his wait is bounded far below.
	other := a.connectAs(bob)
	echoCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := other.request(echoCtx, other.newID(), "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}})
	require.NoError(t, err, "bob's echo waited for a slot alice held")
	require.Empty(t, resp.Error)
	assert.Contains(t, string(resp.Result), "hi")
}
