package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsPair is a certificate for 127.0.0.1 signed by a test CA, in PEM.
type tlsPair struct {
	certPEM, keyPEM []byte
	serial          *big.Int
}

// tlsCA is a certificate authority made for one test.
type tlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTLSCA(t *testing.T) *tlsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mcp-aggregator test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tlsCA{cert: cert, key: key, pool: pool}
}

// issue makes a server certificate for 127.0.0.1 with the given serial.
func (ca *tlsCA) issue(t *testing.T, serial int64) tlsPair {
	t.Helper()
	return ca.issueFor(t, serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// issueFor makes a server certificate for 127.0.0.1 with the given serial,
// valid from notBefore to notAfter.
func (ca *tlsCA) issueFor(t *testing.T, serial int64, notBefore, notAfter time.Time) tlsPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "gateway"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return tlsPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		serial:  big.NewInt(serial),
	}
}

// install writes the pair the way a renewal tool does: each file replaced whole
// by a rename, the key first.
func (p tlsPair) install(t *testing.T, certFile, keyFile string) {
	t.Helper()
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, p.keyPEM}, {certFile, p.certPEM}} {
		tmp := f.path + ".new"
		require.NoError(t, os.WriteFile(tmp, f.data, 0o600))
		require.NoError(t, os.Rename(tmp, f.path))
	}
}

// tlsClient trusts only ca, and opens a new connection for every request so
// that each one sees the certificate served at that moment.
func tlsClient(ca *tlsCA) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
}

// servedSerial connects to base and returns the serial of the certificate served.
func servedSerial(t *testing.T, client *http.Client, base string) *big.Int {
	t.Helper()
	resp, err := client.Get(base + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)
	return resp.TLS.PeerCertificates[0].SerialNumber
}

// TestTLSServesHTTPSAndFollowsRotation serves the gateway over HTTPS with a
// certificate made here, runs an MCP session through it, then replaces the
// certificate on disk: new connections get the new one without a restart, and a
// broken replacement leaves the last good one in use.
func TestTLSServesHTTPSAndFollowsRotation(t *testing.T) {
	t.Parallel()
	ca := newTLSCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := ca.issue(t, 1001)
	first.install(t, certFile, keyFile)

	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, demoToolsConfig())},
		flags:   []string{"--tls-cert", certFile, "--tls-key", keyFile},
	})
	require.True(t, strings.HasPrefix(a.url, "https://127.0.0.1:"), "the listening line says https: %s", a.url)
	a.waitLoaded()
	base := opsBase(a)
	hc := tlsClient(ca)

	// Plain HTTP on the TLS port gets nowhere.
	resp, err := http.Get("http://" + strings.TrimPrefix(base, "https://") + "/healthz")
	if err == nil {
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port")
		resp.Body.Close()
	}

	// An MCP session over HTTPS.
	box := newInbox()
	c := &client{t: t, wire: &httpWire{url: a.url, inbox: box, hc: tlsClient(ca)}, inbox: box}
	t.Cleanup(func() { assert.NoError(t, c.wire.close()) })
	c.initialize()
	assert.Equal(t, "over tls", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "over tls"})))
	assert.Equal(t, 0, first.serial.Cmp(servedSerial(t, hc, base)))

	// A half-done renewal (a certificate that does not parse) changes nothing.
	require.NoError(t, os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nbroken\n"), 0o600))
	handshakeUntil(t, hc, base, func() bool { return a.log.containsLine("the changed TLS certificate does not load") })
	assert.Equal(t, 0, first.serial.Cmp(servedSerial(t, hc, base)), "the last good certificate is still served")

	// The renewed pair is picked up by new connections.
	second := ca.issue(t, 2002)
	second.install(t, certFile, keyFile)
	handshakeUntil(t, hc, base, func() bool { return servedSerial(t, hc, base).Cmp(second.serial) == 0 })
	assert.True(t, a.log.containsLine(`msg="TLS certificate reloaded"`, `subject="CN=gateway"`))
	// The session opened before the rotation carries on.
	assert.Equal(t, "still here", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "still here"})))
}

// handshakeUntil makes handshakes until done reports true: the files are looked
// at on handshakes only, at most once a second, so there is no event to wait for.
func handshakeUntil(t *testing.T, hc *http.Client, base string, done func() bool) {
	t.Helper()
	ok := corePoll(15*time.Second, 100*time.Millisecond, func() bool {
		if resp, err := hc.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
		}
		return done()
	})
	require.True(t, ok, "the certificate change was not noticed within 15s")
}

func TestTLSFlagsAreCheckedBeforeStarting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"cert without key", []string{"--http", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "c.pem")}, []string{"--tls-cert and --tls-key go together"}},
		{"key without cert", []string{"--http", "127.0.0.1:0", "--tls-key", filepath.Join(dir, "k.pem")}, []string{"--tls-cert and --tls-key go together"}},
		{"without --http", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, []string{"need --http"}},
		{"missing files", []string{"--http", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", filepath.Join(dir, "none.key")}, []string{"cannot serve HTTPS", "--tls-cert", "none.pem"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, append([]string{"serve"}, tc.args...)...)
			assert.Equal(t, 2, res.code, "stderr: %s", res.stderr)
			for _, w := range tc.wants {
				assert.Contains(t, res.stderr, w)
			}
			assert.NotContains(t, res.stderr, "msg=listening")
		})
	}
	// A key that does not match the certificate.
	ca := newTLSCA(t)
	one, other := ca.issue(t, 1), ca.issue(t, 2)
	certFile, keyFile := filepath.Join(dir, "one.crt"), filepath.Join(dir, "other.key")
	require.NoError(t, os.WriteFile(certFile, one.certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, other.keyPEM, 0o600))
	res := runCLI(t, "serve", "--http", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	assert.Equal(t, 2, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, "private key does not match public key")
}
