package sealed

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// KeySize is the length of a key, in bytes: AES-256.
const KeySize = 32

// MaxKeys bounds the keys of one file: a rotation needs two.
const MaxKeys = 16

// MaxTokenLen bounds a token, in characters: a longer one is refused
// before any decoding, and Seal refuses plaintext that would exceed it.
const MaxTokenLen = 1024

const (
	idSize    = 4 // the key id at the start of every token
	nonceSize = 12
	tagSize   = 16
	// maxFileBytes bounds a key file: MaxKeys lines of hex, with room for
	// comments.
	maxFileBytes = 64 << 10
)

// ErrInvalid is the one error of a token that does not open: malformed,
// too long, altered, sealed under a key not in the ring, or for another
// label. Callers answer it as they answer an unknown id.
var ErrInvalid = errors.New("sealed: token does not open")

// MaxPlaintext is the most plaintext Seal takes: what fits MaxTokenLen
// base64url characters, less the key id, nonce and tag.
const MaxPlaintext = MaxTokenLen*6/8 - idSize - nonceSize - tagSize

type key struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// Ring is a set of keys: the first seals, every one opens.
type Ring struct {
	keys []key
}

// keyID names a key without revealing it: the start of a hash of it under
// a label of this package's own.
func keyID(k []byte) [idSize]byte {
	h := sha256.Sum256(append([]byte("mcp-aggregator session key id\x00"), k...))
	var id [idSize]byte
	copy(id[:], h[:idSize])
	return id
}

// NewRing makes a ring of keys, each KeySize bytes; the first seals.
func NewRing(keys ...[]byte) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%d keys: at most %d", len(keys), MaxKeys)
	}
	r := &Ring{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("key %d is %d bytes: a key is %d", i+1, len(k), KeySize)
		}
		aead, err := NewAEAD(k)
		if err != nil {
			return nil, err
		}
		r.keys = append(r.keys, key{id: keyID(k), aead: aead})
	}
	return r, nil
}

// ParseKeys reads a key file's contents: one key a line, 32 bytes as 64
// hex digits or as base64 (standard or URL alphabet, padded or not);
// blank lines and lines starting with # are skipped. An error names the
// file and the line, never the key.
func ParseKeys(name string, data []byte) (*Ring, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes: a key file holds at most %d keys, one a line", name, len(data), MaxKeys)
	}
	var keys [][]byte
	seen := map[[idSize]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := DecodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v; generate a key with: head -c 32 /dev/urandom | base64", name, n, err)
		}
		id := keyID(k)
		if first, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s:%d: the same key as line %d: remove one", name, n, first)
		}
		seen[id] = n
		keys = append(keys, k)
		if len(keys) > MaxKeys {
			return nil, fmt.Errorf("%s:%d: more than %d keys: a rotation needs two, remove the old ones", name, n, MaxKeys)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key: write one key a line, such as the output of: head -c 32 /dev/urandom | base64", name)
	}
	return NewRing(keys...)
}

// NewAEAD is AES-256-GCM under key, KeySize bytes: the one cipher of
// every key the aggregator is given (session ids, the vault of per-user
// logins).
func NewAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("the key is %d bytes: a key is %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// DecodeKey decodes a key as an operator writes it: KeySize random bytes
// as 64 hex digits or as base64 (standard or URL alphabet, padded or not);
// surrounding space is ignored. Its error says what is wrong without
// quoting the text, and callers add where it came from (a file and line,
// a setting).
func DecodeKey(line string) ([]byte, error) {
	line = strings.TrimSpace(line)
	if len(line) == 2*KeySize {
		if k, err := hex.DecodeString(line); err == nil {
			return k, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(line); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("the key is %d bytes: a key is %d random bytes, base64 or hex", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("not a key: a key is %d random bytes as base64 or %d hex digits", KeySize, 2*KeySize)
}

// LoadFile reads and parses a key file.
func LoadFile(path string) (*Ring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ParseKeys(path, data)
}

// Len is the number of keys of the ring.
func (r *Ring) Len() int { return len(r.keys) }

// Seal seals plaintext under the first key, bound to label (which must
// be presented again to Open), into a token of base64url characters.
func (r *Ring) Seal(label string, plaintext []byte) (string, error) {
	if len(plaintext) > MaxPlaintext {
		return "", fmt.Errorf("sealed: %d bytes of state: at most %d fit a token", len(plaintext), MaxPlaintext)
	}
	k := r.keys[0]
	out := make([]byte, idSize+nonceSize, idSize+nonceSize+len(plaintext)+tagSize)
	copy(out, k.id[:])
	if _, err := rand.Read(out[idSize:]); err != nil {
		return "", err
	}
	out = k.aead.Seal(out, out[idSize:idSize+nonceSize], plaintext, additional(label))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// Open opens a token Seal made under one of the ring's keys for label.
// Every failure is ErrInvalid.
func (r *Ring) Open(label, token string) ([]byte, error) {
	if r == nil || len(token) > MaxTokenLen || len(token) < base64.RawURLEncoding.EncodedLen(idSize+nonceSize+tagSize) {
		return nil, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil {
		return nil, ErrInvalid
	}
	var id [idSize]byte
	copy(id[:], raw)
	for _, k := range r.keys {
		if k.id != id {
			continue
		}
		if plain, err := k.aead.Open(nil, raw[idSize:idSize+nonceSize], raw[idSize+nonceSize:], additional(label)); err == nil {
			return plain, nil
		}
	}
	return nil, ErrInvalid
}

func additional(label string) []byte { return []byte("mcp-aggregator session\x00" + label) }

// Keys holds the ring in force, swapped whole when the key file changes;
// its zero value holds none.
type Keys struct {
	ring atomic.Pointer[Ring]
}

// Ring is the ring in force, nil when none was set.
func (k *Keys) Ring() *Ring { return k.ring.Load() }

// Set puts r in force.
func (k *Keys) Set(r *Ring) { k.ring.Store(r) }
