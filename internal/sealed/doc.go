// Package sealed seals a session's portable state into its id, and opens
// it again on any replica that holds the key: AES-256-GCM with a random
// nonce under a key ring read from a file of one or more 32-byte keys (the
// first seals, every one opens), with a short key id in each token so that
// opening tries the one key that sealed it. Tokens are opaque, bounded in
// length and fail to open when altered, sealed under a key no longer in
// the ring, or bound to another label. No key ever appears in an error.
// DecodeKey and NewAEAD are the one reading of a key and its cipher, for
// the vault of per-user logins as for session keys.
package sealed
