package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// signingMethods are the JWS algorithms accepted: asymmetric ones only.
// "none" and the HMAC family (whose key would be the public key itself)
// are refused before any key is looked at.
var signingMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// maxClientName bounds the client name and the subject a token may carry:
// they show in logs and lease keys.
const maxClientName = 256

// oauthVerifier validates JWT access tokens of one issuer for one audience.
type oauthVerifier struct {
	issuer, audience string
	scopes           []string // required
	keys             *keySource
	leeway           time.Duration
	now              func() time.Time
}

// verifyError is why a token was refused, as the client may be told it
// (RFC 6750 error and error_description).
type verifyError struct {
	insufficientScope bool
	unavailable       bool // the issuer's keys are missing: not the token's fault
	description       string
	cause             error
}

func (e *verifyError) Error() string { return e.description }
func (e *verifyError) Unwrap() error { return e.cause }

func invalid(cause error, format string, args ...any) *verifyError {
	return &verifyError{description: fmt.Sprintf(format, args...), cause: cause}
}

// verify checks the token's signature, issuer, audience, lifetime and
// scopes, and returns who it names: the subject of its issuer, with the
// client it was issued to (client_id, else azp) and its claims.
func (v *oauthVerifier) verify(ctx context.Context, token string) (identity.Caller, *verifyError) {
	parser := jwt.NewParser(
		jwt.WithValidMethods(signingMethods),
		jwt.WithIssuer(v.issuer),
		jwt.WithAudience(v.audience),
		jwt.WithLeeway(v.leeway),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(v.now),
	)
	claims := jwt.MapClaims{}
	_, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.keys.lookup(ctx, kid, t.Method.Alg())
	})
	if errors.Is(err, errNoKeys) {
		return identity.Caller{}, &verifyError{unavailable: true, cause: err,
			description: "the gateway cannot verify access tokens right now: it could not fetch the issuer's signing keys; try again shortly"}
	}
	if err != nil {
		return identity.Caller{}, invalid(err, "%s", describe(err))
	}
	sub := firstString(claims, "sub")
	if !fitName(sub) {
		return identity.Caller{}, invalid(nil, "the token names no subject: it needs a sub claim of at most %d characters", maxClientName)
	}
	client := firstString(claims, "client_id", "azp")
	if client != "" && !fitName(client) {
		return identity.Caller{}, invalid(nil, "the token's client_id or azp is over %d characters or holds control characters", maxClientName)
	}
	who := identity.Caller{Principal: identity.Subject(v.issuer, sub), Client: client, Claims: claims}
	if missing := missingScopes(claims, v.scopes); len(missing) > 0 {
		return who, &verifyError{insufficientScope: true,
			description: "the token lacks the scope " + strings.Join(missing, " ")}
	}
	return who, nil
}

// fitName reports whether a subject or client name may be kept: present,
// bounded, and without control characters.
func fitName(s string) bool {
	return s != "" && len(s) <= maxClientName && strings.IndexFunc(s, unicode.IsControl) < 0
}

// describe turns a parse failure into a description a client may see.
func describe(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is not a well-formed JWT"
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, errUnknownKey):
		return "the token's signing key is not one the issuer publishes"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "the token's signature is not valid"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token is not meant for this resource (aud)"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token is from another issuer (iss)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token lacks a required claim (exp, iss or aud)"
	}
	return "the token is not valid"
}

func firstString(claims jwt.MapClaims, names ...string) string {
	for _, n := range names {
		if s, ok := claims[n].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// missingScopes returns the required scopes the token does not grant. The
// scopes are in "scope", a space-separated string (RFC 9068, RFC 8693), or
// in "scp", a string or a list, as some issuers write them.
func missingScopes(claims jwt.MapClaims, required []string) []string {
	if len(required) == 0 {
		return nil
	}
	granted := map[string]bool{}
	for _, name := range []string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case string:
			for _, s := range strings.Fields(v) {
				granted[s] = true
			}
		case []any:
			for _, item := range v {
				if s, ok := item.(string); ok {
					granted[s] = true
				}
			}
		}
	}
	var missing []string
	for _, s := range required {
		if !granted[s] {
			missing = append(missing, s)
		}
	}
	return missing
}
