package auth

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzBearer feeds Authorization header values to the bearer token reader:
// it never panics, and what it accepts is a token68 within bounds.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc.def.ghi", "bearer x==", "Basic dXNlcg==", "Bearer", "Bearer  a b", "Bearer =", "BEARER a/b+c~d-e_f."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		h := http.Header{}
		h.Set("Authorization", value)
		token, ok, malformed := bearerToken(h)
		if ok && malformed {
			t.Fatalf("both ok and malformed for %q", value)
		}
		if ok && (token == "" || len(token) > maxTokenBytes || strings.ContainsAny(token, " \t\"\\,")) {
			t.Fatalf("accepted %q from %q", token, value)
		}
	})
}

// FuzzJWKS feeds documents to the JWK Set reader: it never panics, and every
// key it returns is usable.
func FuzzJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"oct","k":"c2VjcmV0"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, _, err := parseJWKS(data)
		if err != nil && len(keys) > 0 {
			t.Fatal("keys returned with an error")
		}
		for _, k := range keys {
			if k.key == nil {
				t.Fatal("a key without its public key")
			}
		}
	})
}
