package integration

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openStream opens the session's standalone GET stream as the client
// (with the token it presents) and returns a channel closed when the
// server ends it.
func openStream(t *testing.T, a *aggregator, c *client) <-chan struct{} {
	t.Helper()
	resp := getStream(t, a, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return done
}

// TestAuthWithdrawnTokenEndsItsSessions: a reload that removes a client's
// token ends that client's sessions, so that an open stream does not keep
// receiving what the gateway sends after its credentials are withdrawn;
// the other clients' sessions stay.
func TestAuthWithdrawnTokenEndsItsSessions(t *testing.T) {
	t.Parallel()
	config := profilesConfig()
	a, tok, path := startProfiles(t, config)
	laptop, tablet := a.connectAs(tok.laptop), a.connectAs(tok.tablet)
	laptopStream := openStream(t, a, laptop)
	tabletStream := openStream(t, a, tablet)

	r := &reloadRig{t: t, a: a, c: tablet, path: path}
	edited := strings.Replace(config, "      laptop: { env: LAPTOP_TOKEN }\n", "", 1)
	require.NotEqual(t, config, edited)
	r.save(edited)
	r.waitReload()
	select {
	case <-laptopStream:
	case <-time.After(reloadWait):
		t.Fatal("laptop's stream is still open after its token was withdrawn")
	}
	relLogLine(t, a, reloadWait, `msg="session ended"`, "withdrawn")
	// Its token is gone: nothing is left to close (a DELETE would get 401).
	w := laptop.wire.(*httpWire)
	w.mu.Lock()
	w.session = ""
	w.mu.Unlock()
	select {
	case <-tabletStream:
		t.Fatal("tablet's stream ended, though its token stays")
	default:
	}
	assert.NotEmpty(t, tablet.listTools(), "tablet's session goes on")
}
