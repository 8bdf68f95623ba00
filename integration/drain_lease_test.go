package integration

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrainRefusesSessionlessLeasesHeldElsewhere: while draining, a sessionless call
// naming a lease this replica never had is refused with 503 and Retry-After, as a new
// session is, instead of leasing it a fresh instance here; a sessionless call naming a
// lease held here is served on its instance.
func TestDrainRefusesSessionlessLeasesHeldElsewhere(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, replicaConfig())}})
	a.waitLoaded()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	assert.Equal(t, 1, sessionlessIncrement(t, a.url, "here", false))
	// A session's call in flight keeps the replica from exiting while the test looks.
	s := &rsession{url: a.url}
	require.NoError(t, s.open(ctx))
	slow := slowCall(ctx, t, s, 3)

	code, body := drainPost(t, a, http.MethodPost, nil)
	require.Equal(t, http.StatusAccepted, code, body)
	r, err := sessionlessPost(ctx, a.url, "elsewhere", map[string]string{"Mcp-Lease": "elsewhere"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status, "a lease this replica never had: %s %s", r.body, r.result)
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.Contains(t, string(r.body), "draining")
	assert.Equal(t, 2, sessionlessIncrement(t, a.url, "here", true), "the lease held here is served, on its instance")

	assert.NoError(t, <-slow, "the call in flight finishes")
	waitExit(t, a)
	assert.Len(t, leaseEvents(a, "leased", "c"), 1, "no instance was leased during the drain")
}
