package tlsreload

import (
	"crypto/x509"
	"fmt"
	"io/fs"
	"runtime"
	"time"
)

// warnings are what is wrong with a pair that loads: a certificate
// outside its validity period, which clients refuse, and a private key
// file that users other than its owner may read (the style of the OAuth
// token store's check of its own files).
func warnings(leaf *x509.Certificate, keyFile string, keyMode fs.FileMode, now time.Time) []string {
	var out []string
	switch {
	case now.After(leaf.NotAfter):
		out = append(out, fmt.Sprintf("the TLS certificate expired on %s; clients will refuse it", leaf.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(leaf.NotBefore):
		out = append(out, fmt.Sprintf("the TLS certificate is not valid before %s; clients will refuse it until then", leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	if keyMode.Perm()&0o077 != 0 && runtime.GOOS != "windows" {
		out = append(out, fmt.Sprintf("the TLS private key %s may be read by other users (mode %v); run chmod 600 on it", keyFile, keyMode.Perm()))
	}
	return out
}
