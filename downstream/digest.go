package downstream

import (
	"crypto/sha256"
	"encoding/hex"
)

// SessionDigest names a session in logs, on the status page and in
// /status.json without revealing its id, which over HTTP is the session's
// credential: the first 12 hex digits of the id's SHA-256. Every place that
// names a session names it by this, so that one session is found by one
// string everywhere.
func SessionDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}
