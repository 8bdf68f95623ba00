package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTLSWarnsAndRefusesExpiredRenewal: a certificate that expired in 2020
// and a key file others may read are served at start, with a warning for
// each; a renewal to a valid pair is taken, and a renewal after it to an
// expired pair is refused with an error: the valid certificate is the one
// a handshake still gets.
func TestTLSWarnsAndRefusesExpiredRenewal(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("file modes say nothing of who may read a file on Windows")
	}
	ca := newTLSCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	expired := ca.issueFor(t, 2020, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	expired.install(t, certFile, keyFile)
	require.NoError(t, os.Chmod(keyFile, 0o644))

	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, demoToolsConfig())},
		flags:   []string{"--tls-cert", certFile, "--tls-key", keyFile},
	})
	a.waitLoaded()
	assert.True(t, a.log.containsLine("level=WARN", `msg="the TLS certificate expired on 2020-01-01T00:00:00Z; clients will refuse it"`), "no warning of the expired certificate:\n%s", a.log)
	assert.True(t, a.log.containsLine("level=WARN", `msg="the TLS private key `+keyFile+` may be read by other users (mode -rw-r--r--); run chmod 600 on it"`),
		"no warning of the key's mode:\n%s", a.log)
	base := opsBase(a)
	hc := tlsClient(ca)

	valid := ca.issue(t, 3003)
	valid.install(t, certFile, keyFile) // mode 0600
	handshakeUntil(t, hc, base, func() bool { return a.log.containsLine(`msg="TLS certificate reloaded"`) })
	assert.Equal(t, 0, valid.serial.Cmp(servedSerial(t, hc, base)))

	again := ca.issueFor(t, 2021, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	again.install(t, certFile, keyFile)
	handshakeUntil(t, hc, base, func() bool { return a.log.containsLine("the renewed TLS certificate expired") })
	assert.True(t, a.log.containsLine("level=ERROR", `msg="the renewed TLS certificate expired on 2020-01-01T00:00:00Z; serving the previous one until the files change again"`), "%s", a.log)
	assert.Equal(t, 0, valid.serial.Cmp(servedSerial(t, hc, base)), "the valid certificate is still served")
}
