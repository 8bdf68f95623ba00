package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// named is the key of the sessionless conversation name, of no client's:
// the keys the pool's tests lease for.
func named(name string) Key { return NamedKey(identity.Principal{}, name) }

func TestKeyString(t *testing.T) {
	bot := identity.Client("ci-bot")
	for _, tc := range []struct {
		name string
		key  Key
		want string
	}{
		{"no lease", Key{}, ""},
		{"session", SessionKey(identity.Principal{}, "abc"), "session:abc"},
		{"named", NamedKey(identity.Principal{}, "conv"), "meta:conv"},
		{"anonymous", AnonymousKey(identity.Principal{}), "anonymous"},
		{"a client's session", SessionKey(bot, "abc"), `client:"ci-bot" session:abc`},
		{"a client's conversation", NamedKey(bot, "conv"), `client:"ci-bot" meta:conv`},
		{"a client's anonymous", AnonymousKey(bot), `client:"ci-bot" anonymous`},
		{"a quoted client name", NamedKey(identity.Client(`a "b"`), "x"), `client:"a \"b\"" meta:x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.key.String())
			raw, err := json.Marshal(tc.key)
			require.NoError(t, err)
			want, _ := json.Marshal(tc.want)
			assert.JSONEq(t, string(want), string(raw))
		})
	}
}

// TestKeysDiffer: keys compare by client, kind and id; none can stand in
// for another, whatever their names hold.
func TestKeysDiffer(t *testing.T) {
	none := identity.Principal{}
	for _, tc := range []struct {
		name string
		a, b Key
	}{
		{"a session and a conversation of one name", SessionKey(none, "x"), NamedKey(none, "x")},
		{"a conversation named like a client's", NamedKey(none, `client:"bot" meta:x`), NamedKey(identity.Client("bot"), "x")},
		{"two clients' conversations", NamedKey(identity.Client("a"), "x"), NamedKey(identity.Client("b"), "x")},
		{"a client and an address of one name", NamedKey(identity.Client("x"), "c"), NamedKey(identity.Address("x"), "c")},
		{"anonymous and no lease", AnonymousKey(none), Key{}},
		{"anonymous of two clients", AnonymousKey(identity.Client("a")), AnonymousKey(identity.Client("b"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.NotEqual(t, tc.a, tc.b)
			assert.Len(t, map[Key]bool{tc.a: true, tc.b: true}, 2)
		})
	}
	assert.Equal(t, NamedKey(identity.Client("a"), "x"), NamedKey(identity.Client("a"), "x"))
}

func TestKeySessionID(t *testing.T) {
	id, ok := SessionKey(identity.Client("bot"), "abc").SessionID()
	assert.True(t, ok)
	assert.Equal(t, "abc", id)
	for _, k := range []Key{NamedKey(identity.Principal{}, "abc"), AnonymousKey(identity.Principal{}), {}} {
		_, ok := k.SessionID()
		assert.False(t, ok, "%v", k)
	}
}
