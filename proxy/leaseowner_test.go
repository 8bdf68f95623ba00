package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// A session's leased calls share one lease owner while who calls stays
// the same, and get a new one, which says so, when it changes.
func TestSessionLeaseOwner(t *testing.T) {
	s := &Session{}
	claims := map[string]any{"sub": "alice", "team": "a"}
	req := &downstream.Request{Principal: identity.Client("app"), Client: "app", Claims: claims, View: "ops"}
	first := s.leaseOwner(req)
	assert.Equal(t, ownerOf(req), *first)
	assert.Same(t, first, s.leaseOwner(&downstream.Request{Principal: identity.Client("app"), Client: "app", Claims: claims, View: "ops"}),
		"the same caller, claims and view: the owner of the latest call")

	for name, next := range map[string]*downstream.Request{
		"view":      {Principal: identity.Client("app"), Client: "app", Claims: claims, View: "dev"},
		"client":    {Principal: identity.Client("app"), Client: "other", Claims: claims, View: "ops"},
		"principal": {Principal: identity.Client("bot"), Client: "app", Claims: claims, View: "ops"},
		"claims":    {Principal: identity.Client("app"), Client: "app", Claims: map[string]any{"sub": "alice", "team": "b"}, View: "ops"},
		"no claims": {Principal: identity.Client("app"), Client: "app", View: "ops"},
	} {
		before := s.leaseOwner(req)
		changed := s.leaseOwner(next)
		assert.NotSame(t, before, changed, name)
		assert.Equal(t, ownerOf(next), *changed, name)
		assert.Same(t, changed, s.leaseOwner(next), "%s: kept for the next call", name)
	}
}
