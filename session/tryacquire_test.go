package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TryAcquireFor grants what needs no wait (a shared instance, a lease
// that serves as it is) and, for a lease that would have to start, does
// nothing and says so.
func TestTryAcquireForGrantsOnlyWhatNeedsNoWait(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")

	shared := startPool(t, f, Config{Server: "counter", Stateless: true})
	g, err, ok := shared.TryAcquireFor(named("a"), Claim{})
	require.True(t, ok)
	require.NoError(t, err)
	g.Done()

	leased := startPool(t, f, Config{Server: "counter"})
	g, err, ok = leased.TryAcquireFor(named("b"), Claim{})
	assert.False(t, ok, "a lease not yet held would have to start")
	assert.Nil(t, g)
	assert.NoError(t, err)
	_, held := leased.Held(named("b"))
	assert.False(t, held, "nothing was done")

	first := acquire(t, leased, named("b"))
	first.Announced()
	first.Done()
	g, err, ok = leased.TryAcquireFor(named("b"), Claim{})
	require.True(t, ok, "the lease serves as it is")
	require.NoError(t, err)
	assert.Same(t, first.Instance, g.Instance)
	g.Done()
}
