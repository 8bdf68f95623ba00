package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// maxPEMBytes bounds a certificate or key file: a chain of a few
// certificates is a few KiB, so anything near this is not one.
const maxPEMBytes = 1 << 20

// tlsCheckEvery is how often, at most, a handshake looks whether the
// files changed; between checks handshakes use the loaded certificate.
const tlsCheckEvery = time.Second

// certReloader serves the certificate of a cert and key file pair and loads
// them again when either changes, so that a renewed certificate (certbot,
// cert-manager) is used without a restart. A pair that does not load (a
// renewal caught halfway, a key that does not match) leaves the last good
// certificate in use, and is tried again when the files change again.
type certReloader struct {
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

// newCertReloader loads the pair once; an error there is the operator's to
// fix before the server starts.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cert, r.stamps, r.checked = cert, stamps, r.now()
	return r, nil
}

// config is the server's TLS config: TLS 1.2 at least, HTTP/1.1 (the MCP
// endpoint's streams are written for it), the certificate from r.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: r.certificate}
}

// certificate is tls.Config.GetCertificate.
func (r *certReloader) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.checked) < tlsCheckEvery {
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
	cert, err := r.load()
	if err != nil {
		r.log.Warn("the changed TLS certificate does not load; serving the previous one until the files change again", "err", err)
		return r.cert, nil
	}
	r.cert = cert
	r.log.Info("TLS certificate reloaded", "cert", r.certFile, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return r.cert, nil
}

func (r *certReloader) stat() ([2]fileStamp, error) {
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

// load reads and checks the pair.
func (r *certReloader) load() (*tls.Certificate, error) {
	certPEM, err := readBounded(r.certFile, "--tls-cert")
	if err != nil {
		return nil, err
	}
	keyPEM, err := readBounded(r.keyFile, "--tls-key")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %w (the cert file holds the PEM certificate chain, leaf first; the key file its PEM private key)", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert %s: %w", r.certFile, err)
		}
	}
	return &cert, nil
}

// readBounded reads a file of at most maxPEMBytes.
func readBounded(name, flagName string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flagName, name, err)
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("%s %s: larger than %d bytes; it should hold a PEM certificate chain or key", flagName, name, maxPEMBytes)
	}
	return b, nil
}

// tlsFlags checks that --tls-cert and --tls-key come together and only
// with --http.
func tlsFlags(certFile, keyFile, httpAddr string) error {
	switch {
	case certFile == "" && keyFile == "":
		return nil
	case certFile == "" || keyFile == "":
		return errors.New("--tls-cert and --tls-key go together: give both files (the PEM certificate chain and its private key) or neither")
	case httpAddr == "":
		return errors.New("--tls-cert and --tls-key serve HTTPS and need --http ADDR")
	}
	return nil
}
