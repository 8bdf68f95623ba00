package requeststate

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Prefix starts every token this package issues, so that a token of the
// aggregator's is told apart from one an upstream issued at a glance,
// before any work is spent on it.
const Prefix = "mcpagg1."

// MaxLen bounds the length of a token Open looks at; longer input is
// refused before it is decoded.
const MaxLen = 256

// Digest is a SHA-256 digest.
type Digest [32]byte

// Nonce is 16 random bytes.
type Nonce [16]byte

// Claims are what a token carries.
type Claims struct {
	// Exchange names the held exchange the token continues.
	Exchange Nonce
	// Round is the round of the exchange the token was issued for; each
	// round's token is good once.
	Round uint32
	// Nonce is random per token, so that no two tokens are alike even for
	// the same round.
	Nonce Nonce
	// Caller is the digest of the caller's identity (see CallerDigest).
	Caller Digest
	// Request is the digest of the request's identity (see RequestDigest).
	Request Digest
	// Expires is when the token stops being accepted.
	Expires time.Time
}

// Errors Open reports. A caller tells the client no more than that the
// state was refused and why in these words: nothing of the key or the
// expected values.
var (
	ErrMalformed = errors.New("requestState is not one the aggregator issued (malformed)")
	ErrForged    = errors.New("requestState failed authentication")
	ErrExpired   = errors.New("requestState has expired")
)

// layout of the authenticated payload
const (
	version     = 1
	payloadLen  = 1 + 8 + 16 + 4 + 16 + 32 + 32
	macLen      = sha256.Size
	encodedLen  = len(Prefix) + (payloadLen+macLen+2)/3*4 // padded base64 upper bound
	keyLen      = 32
	domainLabel = "mcp-aggregator requestState v1\x00"
)

// strictBase64 refuses non-canonical encodings: one payload, one token.
var strictBase64 = base64.RawURLEncoding.Strict()

// Codec seals and opens tokens under one key.
type Codec struct {
	key [keyLen]byte
	now func() time.Time
}

// New returns a Codec with a fresh random key: tokens it issues are good
// only in this process.
func New() (*Codec, error) {
	c := &Codec{now: time.Now}
	if _, err := rand.Read(c.key[:]); err != nil {
		return nil, fmt.Errorf("requestState key: %w", err)
	}
	return c, nil
}

// NewNonce returns 16 random bytes.
func NewNonce() Nonce {
	var n Nonce
	_, _ = rand.Read(n[:]) // crypto/rand.Read never fails on supported platforms
	return n
}

// Seal issues a token for claims; a zero Nonce is replaced by a random one.
func (c *Codec) Seal(cl Claims) string {
	if cl.Nonce == (Nonce{}) {
		cl.Nonce = NewNonce()
	}
	buf := make([]byte, 0, payloadLen+macLen)
	buf = append(buf, version)
	buf = binary.BigEndian.AppendUint64(buf, uint64(cl.Expires.UnixNano()))
	buf = append(buf, cl.Exchange[:]...)
	buf = binary.BigEndian.AppendUint32(buf, cl.Round)
	buf = append(buf, cl.Nonce[:]...)
	buf = append(buf, cl.Caller[:]...)
	buf = append(buf, cl.Request[:]...)
	buf = append(buf, c.mac(buf)...)
	return Prefix + base64.RawURLEncoding.EncodeToString(buf)
}

// Open checks a token and returns its claims: it must be one this Codec
// issued (ErrMalformed, ErrForged) and not have expired (ErrExpired).
// Binding (caller, request, round, single use) is the caller's to check
// against the claims. The MAC is compared in constant time, before any
// claim is read.
func (c *Codec) Open(token string) (Claims, error) {
	if len(token) > MaxLen || len(token) > encodedLen || !strings.HasPrefix(token, Prefix) {
		return Claims{}, ErrMalformed
	}
	raw, err := strictBase64.DecodeString(token[len(Prefix):])
	if err != nil || len(raw) != payloadLen+macLen {
		return Claims{}, ErrMalformed
	}
	payload, mac := raw[:payloadLen], raw[payloadLen:]
	if subtle.ConstantTimeCompare(mac, c.mac(payload)) != 1 {
		return Claims{}, ErrForged
	}
	if payload[0] != version {
		return Claims{}, ErrMalformed
	}
	var cl Claims
	p := payload[1:]
	cl.Expires = time.Unix(0, int64(binary.BigEndian.Uint64(p)))
	p = p[8:]
	p = p[copy(cl.Exchange[:], p):]
	cl.Round = binary.BigEndian.Uint32(p)
	p = p[4:]
	p = p[copy(cl.Nonce[:], p):]
	p = p[copy(cl.Caller[:], p):]
	copy(cl.Request[:], p)
	if !c.now().Before(cl.Expires) {
		return Claims{}, ErrExpired
	}
	return cl, nil
}

func (c *Codec) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, c.key[:])
	h.Write([]byte(domainLabel))
	h.Write(payload)
	return h.Sum(nil)
}

// CallerDigest is the digest a token binds a caller by: the identity itself
// never travels in the token.
func CallerDigest(identity string) Digest {
	return sha256.Sum256([]byte("caller\x00" + identity))
}

// Equal compares two digests in constant time.
func Equal(a, b Digest) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }
