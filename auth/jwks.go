package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Bounds on a JWK Set: more keys than any issuer publishes at once, and
// RSA moduli of at least 2048 bits (smaller keys are forgeable) and at most
// 8192 (larger ones make every verification slow).
const (
	maxKeys    = 64
	minRSABits = 2048
	maxRSABits = 8192
)

// publicKey is one verification key of the issuer's JWK Set.
type publicKey struct {
	kid string
	alg string // the key's "alg" member; "" when it does not restrict the algorithm
	key crypto.PublicKey
}

// parseJWKS reads a JWK Set (RFC 7517 §5). Keys this gateway cannot use
// (encryption keys, symmetric keys, unknown types or curves, weak RSA) are
// skipped and counted in skipped; a document that is not a JWK Set at all
// is an error.
func parseJWKS(data []byte) (keys []publicKey, skipped int, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, 0, fmt.Errorf("not a JWK Set: %v", err)
	}
	if set.Keys == nil {
		return nil, 0, errors.New(`not a JWK Set: no "keys" array`)
	}
	if len(set.Keys) > maxKeys {
		return nil, 0, fmt.Errorf("the JWK Set has %d keys, more than the %d accepted", len(set.Keys), maxKeys)
	}
	for _, raw := range set.Keys {
		k, err := parseJWK(raw)
		if err != nil {
			skipped++
			continue
		}
		keys = append(keys, k)
	}
	return keys, skipped, nil
}

// jwk holds the members of a JWK that matter for signature verification.
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	D      string   `json:"d"`
}

func parseJWK(raw json.RawMessage) (publicKey, error) {
	var j jwk
	if err := json.Unmarshal(raw, &j); err != nil {
		return publicKey{}, err
	}
	if j.Use != "" && j.Use != "sig" {
		return publicKey{}, fmt.Errorf("key %q is for %q, not signatures", j.Kid, j.Use)
	}
	if len(j.KeyOps) > 0 && !contains(j.KeyOps, "verify") {
		return publicKey{}, fmt.Errorf("key %q does not allow verify", j.Kid)
	}
	if j.D != "" {
		// A private key published by mistake: refuse to trust an issuer
		// that leaks its signing keys.
		return publicKey{}, fmt.Errorf("key %q is a private key", j.Kid)
	}
	pk := publicKey{kid: j.Kid, alg: j.Alg}
	switch j.Kty {
	case "RSA":
		n, err := b64int(j.N)
		if err != nil {
			return publicKey{}, fmt.Errorf("key %q: n: %v", j.Kid, err)
		}
		e, err := b64int(j.E)
		if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return publicKey{}, fmt.Errorf("key %q: e is not a usable RSA exponent", j.Kid)
		}
		if bits := n.BitLen(); bits < minRSABits || bits > maxRSABits {
			return publicKey{}, fmt.Errorf("key %q: RSA modulus of %d bits; %d to %d are accepted", j.Kid, bits, minRSABits, maxRSABits)
		}
		pk.key = &rsa.PublicKey{N: n, E: int(e.Int64())}
	case "EC":
		var curve elliptic.Curve
		switch j.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return publicKey{}, fmt.Errorf("key %q: curve %q is not supported", j.Kid, j.Crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := b64bytes(j.X)
		y, errY := b64bytes(j.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return publicKey{}, fmt.Errorf("key %q: x and y must be %d bytes each", j.Kid, size)
		}
		// ParseUncompressedPublicKey checks that the point is on the curve.
		point := append(append([]byte{4}, x...), y...)
		key, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return publicKey{}, fmt.Errorf("key %q: %v", j.Kid, err)
		}
		pk.key = key
	case "OKP":
		if j.Crv != "Ed25519" {
			return publicKey{}, fmt.Errorf("key %q: curve %q is not supported", j.Kid, j.Crv)
		}
		x, err := b64bytes(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return publicKey{}, fmt.Errorf("key %q: x must be %d bytes", j.Kid, ed25519.PublicKeySize)
		}
		pk.key = ed25519.PublicKey(x)
	default:
		return publicKey{}, fmt.Errorf("key %q: key type %q is not supported", j.Kid, j.Kty)
	}
	return pk, nil
}

// b64bytes decodes base64url without padding, as JWK writes it (a padded
// value is accepted too).
func b64bytes(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

func b64int(s string) (*big.Int, error) {
	b, err := b64bytes(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
