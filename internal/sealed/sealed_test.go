package sealed

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func ring(t *testing.T, keys ...[]byte) *Ring {
	t.Helper()
	r, err := NewRing(keys...)
	require.NoError(t, err)
	return r
}

func TestSealOpen(t *testing.T) {
	a, b := testKey(1), testKey(2)
	sealer := ring(t, a)
	tok, err := sealer.Seal("r1-", []byte(`{"v":"2025-06-18"}`))
	require.NoError(t, err)
	other, err := sealer.Seal("r1-", []byte(`{"v":"2025-06-18"}`))
	require.NoError(t, err)
	assert.NotEqual(t, tok, other, "a random nonce makes every token different")

	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	raw[len(raw)/2] ^= 1
	flipped := base64.RawURLEncoding.EncodeToString(raw)

	for _, tc := range []struct {
		name  string
		ring  *Ring
		label string
		token string
		opens bool
	}{
		{"the sealing key", ring(t, a), "r1-", tok, true},
		{"a rotated ring: the old key second", ring(t, b, a), "r1-", tok, true},
		{"the key removed", ring(t, b), "r1-", tok, false},
		{"another label", ring(t, a), "r2-", tok, false},
		{"one bit altered", ring(t, a), "r1-", flipped, false},
		{"truncated", ring(t, a), "r1-", tok[:len(tok)-1], false},
		{"empty", ring(t, a), "r1-", "", false},
		{"not base64", ring(t, a), "r1-", strings.Repeat("!", 60), false},
		{"too long", ring(t, a), "r1-", strings.Repeat("A", MaxTokenLen+1), false},
		{"no ring", nil, "r1-", tok, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ring.Open(tc.label, tc.token)
			if tc.opens {
				require.NoError(t, err)
				assert.JSONEq(t, `{"v":"2025-06-18"}`, string(got))
			} else {
				assert.ErrorIs(t, err, ErrInvalid)
				assert.Nil(t, got)
			}
		})
	}
}

// Every bit of a token matters: flipping any one of them fails it.
func TestOpenRefusesEveryOneBitChange(t *testing.T) {
	r := ring(t, testKey(7))
	tok, err := r.Seal("", []byte("state"))
	require.NoError(t, err)
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range len(raw) * 8 {
		alt := bytes.Clone(raw)
		alt[i/8] ^= 1 << (i % 8)
		_, err := r.Open("", base64.RawURLEncoding.EncodeToString(alt))
		require.ErrorIs(t, err, ErrInvalid, "bit %d", i)
	}
}

func TestSealBoundsTheToken(t *testing.T) {
	r := ring(t, testKey(1))
	tok, err := r.Seal("x", make([]byte, MaxPlaintext))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(tok), MaxTokenLen)
	_, err = r.Open("x", tok)
	require.NoError(t, err)
	_, err = r.Seal("x", make([]byte, MaxPlaintext+1))
	assert.ErrorContains(t, err, "at most")
}

func TestParseKeys(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	for _, tc := range []struct {
		name, file string
		keys       int
		err        string
	}{
		{"base64", base64.StdEncoding.EncodeToString(k1) + "\n", 1, ""},
		{"hex and url base64, comments, blank lines", "# current\n" + hex.EncodeToString(k2) + "\n\n# previous\n" + base64.RawURLEncoding.EncodeToString(k1), 2, ""},
		{"CRLF", base64.StdEncoding.EncodeToString(k1) + "\r\n", 1, ""},
		{"empty", "\n# nothing\n", 0, "keys: no key"},
		{"short", "# c\n" + base64.StdEncoding.EncodeToString(k1[:16]) + "\n", 0, "keys:2: the key is 16 bytes"},
		{"malformed", "not a key at all\n", 0, "keys:1: not a key"},
		{"duplicate", hex.EncodeToString(k1) + "\n" + base64.StdEncoding.EncodeToString(k1), 0, "keys:2: the same key as line 1"},
		{"too many", manyKeys(MaxKeys + 1), 0, fmt.Sprintf("more than %d keys", MaxKeys)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseKeys("keys", []byte(tc.file))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				for _, line := range strings.Split(tc.file, "\n") {
					if line = strings.TrimSpace(line); len(line) > 8 && !strings.HasPrefix(line, "#") {
						assert.NotContains(t, err.Error(), line, "the error quotes a key")
					}
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.keys, r.Len())
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(base64.StdEncoding.EncodeToString(testKey(byte(i+1))) + "\n")
	}
	return b.String()
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(testKey(3))+"\n"), 0o600))
	r, err := LoadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 1, r.Len())
	_, err = LoadFile(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("#"), maxFileBytes+1), 0o600))
	_, err = LoadFile(path)
	assert.ErrorContains(t, err, path)
}

func FuzzOpen(f *testing.F) {
	r, err := NewRing(testKey(1), testKey(2))
	require.NoError(f, err)
	tok, err := r.Seal("r1-", []byte(`{"v":"2025-11-25"}`))
	require.NoError(f, err)
	f.Add("r1-", tok)
	f.Add("", "")
	f.Add("r2-", tok)
	f.Fuzz(func(t *testing.T, label, token string) {
		plain, err := r.Open(label, token)
		if err != nil {
			if plain != nil {
				t.Fatal("plaintext with an error")
			}
			return
		}
		// Only what was sealed opens: sealing it again opens to the same.
		again, err := r.Seal(label, plain)
		if err != nil {
			t.Fatal(err)
		}
		back, err := r.Open(label, again)
		if err != nil || !bytes.Equal(back, plain) {
			t.Fatalf("a resealed token does not open to the same plaintext")
		}
	})
}

// BenchmarkOpen is what taking a session up costs a replica: opening a
// sealed id of typical size (about 200 characters).
func BenchmarkOpen(b *testing.B) {
	r, err := NewRing(testKey(1), testKey(2))
	require.NoError(b, err)
	state := []byte(`{"v":"2025-11-25","c":{"roots":{"listChanged":true}},"i":{"name":"claude-code","version":"2.0.0"},"pk":2,"pn":"ci-bot","r":"r1","e":1767225600}`)
	tok, err := r.Seal("r1-", state)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Open("r1-", tok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeKey: the one reading of a key, for session keys and the vault
// alike: hex or base64 of 32 bytes, space around ignored; an error never
// quotes the text.
func TestDecodeKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab}, KeySize)
	for _, text := range []string{hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw),
		" " + base64.RawURLEncoding.EncodeToString(raw) + "\n"} {
		k, err := DecodeKey(text)
		require.NoError(t, err, text)
		assert.Equal(t, raw, k)
	}
	_, err := DecodeKey(base64.StdEncoding.EncodeToString(raw[:16]))
	assert.ErrorContains(t, err, "16 bytes")
	_, err = DecodeKey("not-a-key-but-secret-looking")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret-looking")
	_, err = NewAEAD(raw[:16])
	assert.ErrorContains(t, err, "16 bytes")
	aead, err := NewAEAD(raw)
	require.NoError(t, err)
	assert.Equal(t, 12, aead.NonceSize())
}
