package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// sharedSurfaceConfig fronts one shared demo surface server, which answers a
// resources/subscribe and then at once sends notifications/resources/updated
// for the URI: each instance that is subscribed says so.
func sharedSurfaceConfig(mark string) string {
	return fmt.Sprintf(`version: 1
servers:
  surf:
    truely-stateless: true
    %s
    env: {MARK: %q}
`, demoServer("surface"), mark)
}

// TestSubscriptionFirstUpdateArrives: the upstream sends an update of the
// URI right after it answers resources/subscribe (as a server that pushes
// the current state at once may). The client subscribed by then: the
// update reaches it, whichever of the two the aggregator reads first.
func TestSubscriptionFirstUpdateArrives(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		r := newReloadRig(t, tr, sharedSurfaceConfig("one"))
		for i, uri := range []string{"demo://r/1", "demo://r/2", "demo://r/3"} {
			seen := len(r.c.inboxNotes())
			resp := r.c.mustRequest("resources/subscribe", map[string]any{"uri": uri})
			require.Empty(t, string(resp.Error))
			_, ok := updatedAfter(r.c, seen, uri)
			require.True(t, ok, "subscription %d: the update sent with its answer was dropped", i+1)
		}
	})
}
