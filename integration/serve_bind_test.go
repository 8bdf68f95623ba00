package integration

import (
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nonLoopbackIP returns an address of this machine that is not loopback, or nil.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP
		}
	}
	return nil
}

// TestServeHTTPBindsLoopbackByDefault: an --http address without a host (":PORT" or a
// bare port) listens on loopback only; the machine's other addresses refuse the
// connection.
func TestServeHTTPBindsLoopbackByDefault(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{":0", "0"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			a := startAggregator(t, httpTransport, aggregatorOptions{
				configs: []string{writeConfig(t, "version: 1\nservers: {}\n")},
				flags:   []string{"--http", addr}, // the last --http wins
			})
			u, err := url.Parse(a.url)
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1", u.Hostname(), "listening at %s", a.url)
			a.connect() // it serves MCP there

			ip := nonLoopbackIP(t)
			if ip == nil {
				return // a machine with loopback only has no other address to try
			}
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), u.Port()), 5*time.Second)
			if err == nil {
				conn.Close()
			}
			assert.Error(t, err, "port %s answers on %s, not only on loopback", u.Port(), ip)
		})
	}
}
