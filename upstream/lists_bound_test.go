package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pagingConn answers every tools/list with one page of its own making and a next
// cursor, for ever.
type pagingConn struct {
	page  func(n int) string // the tools array of page n
	pages int
}

func (c *pagingConn) call(_ context.Context, method string, _ any) (json.RawMessage, error) {
	c.pages++
	return json.RawMessage(fmt.Sprintf(`{"tools":%s,"nextCursor":"c%d"}`, c.page(c.pages), c.pages)), nil
}
func (c *pagingConn) notify(context.Context, string, any) error { return nil }
func (c *pagingConn) done() <-chan struct{}                     { return nil }
func (c *pagingConn) err() error                                { return nil }
func (c *pagingConn) close() error                              { return nil }

// TestListIsBoundedAcrossPages: a server whose pages are each within the message
// limit still cannot grow one list without end: past maxListItems items or
// maxListBytes bytes in all, the list fails, saying so, long before maxListPages.
func TestListIsBoundedAcrossPages(t *testing.T) {
	// Smaller bounds, the same code: the real ones take a minute under -race.
	items, bytes := maxListItems, maxListBytes
	maxListItems, maxListBytes = 5_000, 8<<20
	t.Cleanup(func() { maxListItems, maxListBytes = items, bytes })
	many := func(n int) string { // 1,000 small tools per page
		var b strings.Builder
		b.WriteByte('[')
		for i := range 1000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"t%d_%d","inputSchema":{"type":"object"}}`, n, i)
		}
		b.WriteByte(']')
		return b.String()
	}
	big := func(n int) string { // one tool of 1 MiB per page
		return fmt.Sprintf(`[{"name":"t%d","description":%q,"inputSchema":{"type":"object"}}]`, n, strings.Repeat("x", 1<<20))
	}
	for _, tc := range []struct {
		name  string
		page  func(int) string
		want  string
		pages int // the page at which it stops
	}{
		{"items", many, fmt.Sprintf("over %d items", maxListItems), maxListItems/1000 + 1},
		{"bytes", big, fmt.Sprintf("over %d MiB", maxListBytes>>20), maxListBytes>>20 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &pagingConn{page: tc.page}
			inst := &Instance{server: "pager", conn: c, log: slog.New(slog.DiscardHandler)}
			_, err := inst.ListTools(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), `server "pager"`)
			assert.Contains(t, err.Error(), tc.want)
			// It stops at the page that crosses the bound (a page of "big" is a
			// little over 1 MiB).
			assert.InDelta(t, tc.pages, c.pages, 1, "pages asked for")
		})
	}
}
