package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"
)

// maxPEMBytes bounds a certificate or key file: a chain of a few
// certificates is a few KiB, so anything near this is not one.
const maxPEMBytes = 1 << 20

// checkEvery is how often, at most, a handshake looks whether the
// files changed; between checks handshakes use the loaded certificate.
const checkEvery = time.Second

// Reloader serves the certificate of a cert and key file pair and loads
// them again when either changes, so that a renewed certificate (certbot,
// cert-manager) is used without a restart. A pair that does not load (a
// renewal caught halfway, a key that does not match) or whose certificate
// has expired leaves the last good certificate in use, and is tried again
// when the files change again. At start and on every reload it warns of a
// certificate outside its validity period and a key others may read.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamps  [2]fileStamp // of the pair last tried, good or not
	checked time.Time
}

// fileStamp tells a file's versions apart without reading it.
type fileStamp struct {
	mod  time.Time
	size int64
}

// New loads the pair once; an error there is the operator's to fix
// before the server starts. Its messages name the files as the serve
// command's flags do (--tls-cert, --tls-key).
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, keyMode, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cert, r.stamps, r.checked = cert, stamps, r.now()
	r.warn(cert, keyMode)
	return r, nil
}

// warn logs what is wrong with a pair that loads (warnings).
func (r *Reloader) warn(cert *tls.Certificate, keyMode fs.FileMode) {
	for _, w := range warnings(cert.Leaf, r.keyFile, keyMode, r.now()) {
		r.log.Warn(w, "cert", r.certFile, "subject", cert.Leaf.Subject.String())
	}
}

// Config is the server's TLS config: TLS 1.2 at least, HTTP/1.1 (the MCP
// endpoint's streams are written for it), the certificate from r.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: r.Certificate}
}

// Certificate is tls.Config.GetCertificate: the loaded certificate, loaded
// again first when the files changed and the last look is checkEvery old.
// It never fails: a pair that does not load leaves the last good one.
func (r *Reloader) Certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.checked) < checkEvery {
		return r.cert, nil
	}
	r.checked = now
	stamps, err := r.stat()
	if err != nil {
		if stamps != r.stamps {
			r.log.Warn("cannot read the TLS certificate files; serving the loaded certificate", "err", err)
			r.stamps = stamps
		}
		return r.cert, nil
	}
	if stamps == r.stamps {
		return r.cert, nil
	}
	r.stamps = stamps
	cert, keyMode, err := r.load()
	if err != nil {
		r.log.Warn("the changed TLS certificate does not load; serving the previous one until the files change again", "err", err)
		return r.cert, nil
	}
	if now.After(cert.Leaf.NotAfter) {
		// A renewal tool that wrote back an old pair, or a renewal that
		// failed: every client would refuse it.
		r.log.Error("the renewed TLS certificate expired on "+cert.Leaf.NotAfter.UTC().Format(time.RFC3339)+"; serving the previous one until the files change again",
			"cert", r.certFile, "subject", cert.Leaf.Subject.String(), "serving_not_after", r.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		return r.cert, nil
	}
	r.warn(cert, keyMode)
	r.cert = cert
	r.log.Info("TLS certificate reloaded", "cert", r.certFile, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return r.cert, nil
}

func (r *Reloader) stat() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, name := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return out, fmt.Errorf("%s: %w", [2]string{"--tls-cert", "--tls-key"}[i], err)
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

// load reads and checks the pair, and returns the key file's mode too.
func (r *Reloader) load() (*tls.Certificate, fs.FileMode, error) {
	certPEM, _, err := readBounded(r.certFile, "--tls-cert")
	if err != nil {
		return nil, 0, err
	}
	keyPEM, keyMode, err := readBounded(r.keyFile, "--tls-key")
	if err != nil {
		return nil, 0, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, 0, fmt.Errorf("--tls-cert %s and --tls-key %s: %w (the cert file holds the PEM certificate chain, leaf first; the key file its PEM private key)", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, 0, fmt.Errorf("--tls-cert %s: %w", r.certFile, err)
		}
	}
	return &cert, keyMode, nil
}

// readBounded reads a file of at most maxPEMBytes, and returns its mode.
func readBounded(name, flagName string) ([]byte, fs.FileMode, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", flagName, name, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", flagName, name, err)
	}
	if len(b) > maxPEMBytes {
		return nil, 0, fmt.Errorf("%s %s: larger than %d bytes; it should hold a PEM certificate chain or key", flagName, name, maxPEMBytes)
	}
	return b, st.Mode(), nil
}
