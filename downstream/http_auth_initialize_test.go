package downstream

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTPInitializeDoesNotConfirmAnotherClientsSession: an initialize
// that names another client's session gets the answer an unknown session
// id gets, so that a token of one client cannot even tell whether a
// session id of another is live.
func TestHTTPInitializeDoesNotConfirmAnotherClientsSession(t *testing.T) {
	h := newHTTPFake()
	s := serveAuthenticated(t, h)
	id := openAs(t, s, "alice")
	<-h.opened

	unknown := s.post(t, initializeBody, map[string]string{"X-Client": "bob", headerSessionID: "no-such-session-0123456789"})
	unknownStatus, unknownMsg := unknown.StatusCode, readMessage(t, unknown)
	other := s.post(t, initializeBody, map[string]string{"X-Client": "bob", headerSessionID: id})
	otherStatus, otherMsg := other.StatusCode, readMessage(t, other)
	require.NotNil(t, unknownMsg.Error)
	require.NotNil(t, otherMsg.Error)
	assert.Equal(t, unknownStatus, otherStatus, "alice's live session looks like an unknown one to bob")
	assert.Equal(t, unknownMsg.Error.Message, otherMsg.Error.Message, "alice's live session looks like an unknown one to bob")

	own := s.post(t, initializeBody, map[string]string{"X-Client": "alice", headerSessionID: id})
	requireRefused(t, own, http.StatusBadRequest, -32600, "already initialized")
}
