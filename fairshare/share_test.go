package fairshare

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOfNamesTheClientElseTheAddress(t *testing.T) {
	for _, c := range []struct{ client, addr, want string }{
		{"alice", "127.0.0.1:4000", `client "alice"`},
		{"", "127.0.0.1:4000", "address 127.0.0.1"},
		{"", "[::1]:4000", "address ::1"},
		{"", "127.0.0.1:5000", "address 127.0.0.1"}, // the port is not the client
		{"address 127.0.0.1", "", `client "address 127.0.0.1"`},
		{"", "", ""},
	} {
		assert.Equal(t, c.want, Of(c.client, c.addr), "%q %q", c.client, c.addr)
	}
}

func TestSharesRefuseAHolderAtItsCapOnly(t *testing.T) {
	s := Shares{What: "widgets", Setting: "--max-widgets-per-client", Frees: "drop a widget"}
	s.SetMax(2)
	require.NoError(t, s.Take("a"))
	require.NoError(t, s.Take("a"))
	assert.True(t, s.Full("a"))
	err := s.Take("a")
	require.ErrorIs(t, err, ErrShareReached)
	assert.Equal(t, "client share reached: a holds its maximum of 2 widgets (--max-widgets-per-client), the most one client may hold so that others are still served; drop a widget, or an operator can raise --max-widgets-per-client", err.Error())
	assert.Equal(t, 2, s.Held("a"), "a refusal takes nothing")

	require.NoError(t, s.Take("b"), "another holder is still served")
	require.NoError(t, s.Take(""), "no holder, no share")
	require.NoError(t, s.Take(""))
	require.NoError(t, s.Take(""))

	s.Give("a")
	assert.False(t, s.Full("a"))
	require.NoError(t, s.Take("a"))

	s.SetMax(0)
	require.NoError(t, s.Take("a"), "no cap")
}
