package discovery

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileQueries are what a client can send as mcp_search_tools' query:
// the body limit is the only bound before the search.
func hostileQueries() map[string]string {
	var unknown strings.Builder
	for i := 0; unknown.Len() < 1<<20; i++ {
		fmt.Fprintf(&unknown, "zq%dx ", i)
	}
	return map[string]string{
		"a megabyte of unknown words": unknown.String(),
		"one megabyte-long word":      strings.Repeat("a", 1<<20),
		"a megabyte of CJK":           strings.Repeat("読み", 1<<18),
	}
}

// TestSearchWorkIsBoundedByTheQueryLimits: however long a query is, the
// search reads at most MaxQueryBytes of it and MaxQueryWords words, so one
// request costs about what a query within the limits costs. It counts
// allocations, so it runs alone.
func TestSearchWorkIsBoundedByTheQueryLimits(t *testing.T) {
	ix := Build(scaled(loadCatalog(t), 2000))
	for name, q := range hostileQueries() {
		t.Run(name, func(t *testing.T) {
			clipped := clipQuery(q)
			assert.LessOrEqual(t, len(clipped), MaxQueryBytes)
			assert.Equal(t, names(ix.Search(Query{Text: clipped})), names(ix.Search(Query{Text: q})),
				"a query over the limits is searched as its first MaxQueryBytes")
			allocs := testing.AllocsPerRun(1, func() { ix.Search(Query{Text: q}) })
			bound := testing.AllocsPerRun(1, func() { ix.Search(Query{Text: clipped}) })
			assert.LessOrEqual(t, allocs, bound+16, "the search of a huge query does more work than of its clipped form")
		})
	}
}

// TestSearchReadsMaxQueryWords: words past the MaxQueryWords-th change
// nothing.
func TestSearchReadsMaxQueryWords(t *testing.T) {
	t.Parallel()
	ix := Build(smallCatalog())
	filler := strings.TrimSpace(strings.Repeat("zz ", MaxQueryWords))
	assert.Empty(t, ix.Search(Query{Text: filler + " read file"}))
	assert.Equal(t, names(ix.Search(Query{Text: "read file"})), names(ix.Search(Query{Text: "read file " + filler})))
}

// TestCheckQuery: a query over the limits is refused with what is too
// long and how to fix it; one within them, and one right at them, passes.
func TestCheckQuery(t *testing.T) {
	t.Parallel()
	assert.NoError(t, CheckQuery("read a file"))
	assert.NoError(t, CheckQuery(strings.Repeat("a", MaxQueryBytes)))
	assert.NoError(t, CheckQuery(strings.Repeat("w ", MaxQueryWords)))

	err := CheckQuery(strings.Repeat("a", MaxQueryBytes+1))
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("query is %d bytes, over the %d a search reads; say in a few words what the tool should do, or give its name", MaxQueryBytes+1, MaxQueryBytes), err.Error())

	err = CheckQuery(strings.Repeat("w ", MaxQueryWords+1))
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("query has %d words, over the %d a search reads; say in a few words what the tool should do, or give its name", MaxQueryWords+1, MaxQueryWords), err.Error())

	// A cut never splits a character.
	q := strings.Repeat("é", MaxQueryBytes)
	assert.True(t, strings.HasPrefix(q, clipQuery(q)))
	assert.Equal(t, 0, len(clipQuery(q))%2)
}
