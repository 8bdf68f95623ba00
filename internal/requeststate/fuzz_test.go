package requeststate

import (
	"testing"
	"time"
)

// FuzzOpen feeds Open arbitrary tokens: it must never panic, and nothing
// but a token the codec sealed may open.
func FuzzOpen(f *testing.F) {
	c := &Codec{key: [keyLen]byte{7}, now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
	good := c.Seal(Claims{Round: 1, Expires: time.Unix(1_800_000_060, 0), Nonce: Nonce{9}})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(Prefix)
	f.Add("")
	sealed := map[string]bool{good: true}
	f.Fuzz(func(t *testing.T, token string) {
		cl, err := c.Open(token)
		if err == nil && !sealed[token] {
			// Any other token that opens must at least re-seal to
			// itself: base64 has one canonical form per payload here.
			if c.sealWith(cl) != token {
				t.Fatalf("Open accepted a token the codec did not issue: %q", token)
			}
		}
	})
}

// sealWith re-seals claims exactly (nonce included), for the fuzz check.
func (c *Codec) sealWith(cl Claims) string { return c.Seal(cl) }

// FuzzRequestDigest: any params, never a panic.
func FuzzRequestDigest(f *testing.F) {
	f.Add("tools/call", []byte(`{"name":"a","arguments":{"x":1}}`))
	f.Add("resources/read", []byte(`{"uri":"file:///x","requestState":"s"}`))
	f.Add("prompts/get", []byte(`null`))
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		_, _ = RequestDigest(method, params)
	})
}
