package downstream

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// serveAuthenticated serves the transport behind a stand-in for the
// gateway's authentication: the X-Client header names the client.
func serveAuthenticated(t *testing.T, h *httpFake) *httpServer {
	t.Helper()
	return serveAuthenticatedWith(t, h, HTTPOptions{})
}

// serveAuthenticatedWith is serveAuthenticated with opts.
func serveAuthenticatedWith(t *testing.T, h *httpFake, opts HTTPOptions) *httpServer {
	t.Helper()
	return serveAs(t, h, opts, func(r *http.Request) identity.Caller { return identity.ClientCaller(r.Header.Get("X-Client")) })
}

func TestHTTPSessionBelongsToItsClient(t *testing.T) {
	h := newHTTPFake()
	s := serveAuthenticated(t, h)
	id := openAs(t, s, "alice")
	sess := <-h.opened
	assert.Equal(t, identity.Client("alice"), sess.Principal())

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		for _, client := range []string{"bob", ""} {
			hdr := map[string]string{headerSessionID: id, "X-Client": client, "Accept": "text/event-stream"}
			if method == http.MethodPost {
				delete(hdr, "Accept")
			}
			// Word for word the answer to an id never issued: nothing
			// confirms that the session exists.
			unknown := maps.Clone(hdr)
			unknown[headerSessionID] = strings.Repeat("0", len(id))
			want := requireRefused(t, s.request(t, method, list, unknown), http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
			got := requireRefused(t, s.request(t, method, list, hdr), http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
			assert.Equal(t, want.Error, got.Error, "%s by client %q on alice's session", method, client)
		}
	}
	resp := s.post(t, list, map[string]string{headerSessionID: id, "X-Client": "alice"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "the session survived the attempts and serves its own client")
	readMessage(t, resp)
	assert.Equal(t, identity.Client("alice"), h.last().Principal)
	assert.Equal(t, []string{"initialize", "tools/list"}, h.seen(), "nothing of the other clients reached the handler")
}

func TestHTTPSessionlessRequestNamesItsClient(t *testing.T) {
	h := newHTTPFake()
	s := serveAuthenticated(t, h)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	resp := s.post(t, body, map[string]string{"X-Client": "carol", headerProtocol: "2026-07-28", headerMethod: "tools/list"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	assert.Equal(t, identity.Client("carol"), h.last().Principal)
	assert.Nil(t, h.last().Session)
}

// TestHTTPRequestNamesItsPrincipal: a request's principal is its
// authenticated client, else with ClientsByAddress the host it came from,
// else the local user; its holder for the per-client shares follows.
func TestHTTPRequestNamesItsPrincipal(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, tc := range []struct {
		name      string
		byAddress bool
		client    string
		want      identity.Principal
		holder    string
	}{
		{"a client", false, "alice", identity.Client("alice"), `client "alice"`},
		{"a client, by address too", true, "alice", identity.Client("alice"), `client "alice"`},
		{"an address", true, "", identity.Address("127.0.0.1"), "address 127.0.0.1"},
		{"loopback without authentication", false, "", identity.Local(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHTTPFake()
			s := serveAuthenticatedWith(t, h, HTTPOptions{ClientsByAddress: tc.byAddress})
			resp := s.post(t, body, map[string]string{"X-Client": tc.client, headerProtocol: "2026-07-28", headerMethod: "tools/list"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			readMessage(t, resp)
			assert.Equal(t, tc.want, h.last().Principal)
			assert.Equal(t, tc.holder, h.last().Holder)
		})
	}
}
