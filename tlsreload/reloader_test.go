package tlsreload

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfSigned writes a self-signed certificate with serial, valid from an
// hour ago to an hour ahead, and its key, mode 0600.
func selfSigned(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	writePair(t, certFile, keyFile, serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0o600)
}

// writePair writes a self-signed certificate with serial, valid from
// notBefore to notAfter, and its key with keyMode.
func writePair(t *testing.T, certFile, keyFile string, serial int64, notBefore, notAfter time.Time, keyMode os.FileMode) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "test"},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	require.NoError(t, os.Chmod(keyFile, keyMode))
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
}

func TestCertReloaderFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	selfSigned(t, certFile, keyFile, 1)
	r, err := New(certFile, keyFile, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	clock := time.Now()
	r.now = func() time.Time { return clock }
	serial := func() int64 {
		c, err := r.Certificate(nil)
		require.NoError(t, err)
		return c.Leaf.SerialNumber.Int64()
	}
	assert.EqualValues(t, 1, serial())

	selfSigned(t, certFile, keyFile, 2)
	assert.EqualValues(t, 1, serial(), "within a second of the last check the files are not looked at")
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 2, serial())

	// A broken cert keeps the last good one, and is retried once it changes.
	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate"), 0o600))
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 2, serial())
	selfSigned(t, certFile, keyFile, 3)
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 3, serial())

	// Files gone: the loaded certificate stays.
	require.NoError(t, os.Remove(keyFile))
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 3, serial())
}

func TestCertReloaderBoundsTheFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	selfSigned(t, certFile, keyFile, 1)
	huge := make([]byte, maxPEMBytes+1)
	require.NoError(t, os.WriteFile(certFile, huge, 0o600))
	_, err := New(certFile, keyFile, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--tls-cert")
	assert.Contains(t, err.Error(), "larger than")
}
