package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// TestCacheSlotWatchesTheUpstreamsRequests: a result the upstream gave
// after asking the caller something is not kept, so the slot learns of
// every such request, and passes it on unchanged.
func TestCacheSlotWatchesTheUpstreamsRequests(t *testing.T) {
	var nilSlot *cacheSlot
	assert.Nil(t, nilSlot.watch(nil))

	handled := 0
	h := upstream.ServerRequestHandler(func(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		handled++
		return json.RawMessage(`{"action":"accept"}`), nil
	})
	slot := &cacheSlot{}
	assert.Nil(t, slot.watch(nil), "no handler: nothing to watch, the upstream's requests fail")
	w := slot.watch(h)
	require.NotNil(t, w)
	assert.False(t, slot.asked.Load())
	res, rpcErr := w(context.Background(), "elicitation/create", json.RawMessage(`{}`))
	assert.Nil(t, rpcErr)
	assert.JSONEq(t, `{"action":"accept"}`, string(res))
	assert.Equal(t, 1, handled)
	assert.True(t, slot.asked.Load())

	p := New(Options{})
	p.keepResult(slot, json.RawMessage(`{"contents":[],"ttlMs":60000,"cacheScope":"public"}`))
	assert.Zero(t, p.CacheStats().Stores, "a result that depended on the caller's answer is not kept")
}
