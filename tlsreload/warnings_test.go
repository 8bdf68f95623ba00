package tlsreload

import (
	"bytes"
	"crypto/x509"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTLSWarnings(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	valid := &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)}
	tests := []struct {
		name  string
		leaf  *x509.Certificate
		mode  fs.FileMode
		wants []string
	}{
		{"valid, key 0600", valid, 0o600, nil},
		{"valid, key 0400", valid, 0o400, nil},
		{"expired in 2020", &x509.Certificate{NotBefore: time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}, 0o600,
			[]string{"the TLS certificate expired on 2020-01-01T00:00:00Z; clients will refuse it"}},
		{"not yet valid", &x509.Certificate{NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(48 * time.Hour)}, 0o600,
			[]string{"the TLS certificate is not valid before 2026-06-02T00:00:00Z; clients will refuse it until then"}},
		{"key world-readable", valid, 0o644, []string{"the TLS private key k.pem may be read by other users (mode -rw-r--r--); run chmod 600 on it"}},
		{"key group-readable", valid, 0o640, []string{"the TLS private key k.pem may be read by other users (mode -rw-r-----); run chmod 600 on it"}},
		{"both", &x509.Certificate{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}, 0o644,
			[]string{"the TLS certificate expired on 2026-05-31T00:00:00Z; clients will refuse it", "the TLS private key k.pem may be read by other users (mode -rw-r--r--); run chmod 600 on it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && tt.mode&0o077 != 0 {
				t.Skip("file modes say nothing of who may read a file on Windows")
			}
			assert.Equal(t, tt.wants, warnings(tt.leaf, "k.pem", tt.mode, now))
		})
	}
}

// syncBuffer is a log destination for a test that reads it while the
// code under test writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A certificate long expired and a key others can read are served, as
// before, but not in silence.
func TestCertReloaderWarnsAtStart(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes say nothing of who may read a file on Windows")
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writePair(t, certFile, keyFile, 1, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 0o644)
	var logs syncBuffer
	r, err := New(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	c, err := r.Certificate(nil)
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Leaf.SerialNumber.Int64())
	assert.Contains(t, logs.String(), `level=WARN msg="the TLS certificate expired on 2020-01-01T00:00:00Z; clients will refuse it"`)
	assert.Contains(t, logs.String(), `level=WARN msg="the TLS private key `+keyFile+` may be read by other users (mode -rw-r--r--); run chmod 600 on it"`)
}

// A renewal to a pair that has expired is refused: the valid certificate
// stays in use, and the log says so as an error. Other renewals warn as
// the start does.
func TestCertReloaderRefusesAnExpiredRenewal(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	selfSigned(t, certFile, keyFile, 1)
	var logs syncBuffer
	r, err := New(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	assert.Empty(t, logs.String(), "a valid pair, mode 0600, says nothing")
	clock := time.Now()
	r.now = func() time.Time { return clock }
	serial := func() int64 {
		c, err := r.Certificate(nil)
		require.NoError(t, err)
		return c.Leaf.SerialNumber.Int64()
	}

	writePair(t, certFile, keyFile, 2, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 0o600)
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 1, serial(), "the valid certificate is still served")
	assert.Contains(t, logs.String(), `level=ERROR msg="the renewed TLS certificate expired on 2020-01-01T00:00:00Z; serving the previous one until the files change again"`)
	assert.NotContains(t, logs.String(), "TLS certificate reloaded")
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 1, serial())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "said once, not on every check")

	if runtime.GOOS != "windows" {
		writePair(t, certFile, keyFile, 3, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0o644)
		clock = clock.Add(checkEvery)
		assert.EqualValues(t, 3, serial(), "a valid renewal is taken")
		assert.Contains(t, logs.String(), `level=WARN msg="the TLS private key `+keyFile+` may be read by other users`)
	}

	writePair(t, certFile, keyFile, 4, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour), 0o600)
	clock = clock.Add(checkEvery)
	assert.EqualValues(t, 4, serial(), "a renewal not valid yet is taken, with a warning")
	assert.Contains(t, logs.String(), `level=WARN msg="the TLS certificate is not valid before`)
}
