package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

func TestSessionDigestNamesTheDownstreamSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  session.Key
		want string
	}{
		{"a session", sessionKey("r1-0123abcd"), downstream.SessionDigest("r1-0123abcd")},
		{"a client's session", session.SessionKey(identity.Client(`ci "bot"`), "0123abcd"), downstream.SessionDigest("0123abcd")},
		{"a conversation", session.NamedKey(identity.Client("ci"), "conv-1"), downstream.SessionDigest(`client:"ci" meta:conv-1`)},
		{"the anonymous lease", anonymousKey, downstream.SessionDigest("anonymous")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sessionDigest(tc.key))
			assert.Regexp(t, `^[0-9a-f]{12}$`, sessionDigest(tc.key))
		})
	}
}
