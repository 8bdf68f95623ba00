// Package tlsreload serves the HTTPS certificate of a cert and key file
// pair and follows the files as a renewal tool (certbot, cert-manager)
// replaces them, without a restart. A pair that does not load, or a
// renewal that has already expired, leaves the last good certificate in
// use; a certificate outside its validity period or a key others may read
// is warned of, at start and on every reload.
package tlsreload
