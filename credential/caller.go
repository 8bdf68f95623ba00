package credential

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// maxHeaderValue bounds a value taken from the caller into a header: a
// claim is the token issuer's, not ours, and could be of any size.
const maxHeaderValue = 4096

// Caller is what the gateway learned of who is calling from their
// credentials, carried on the request's context down to the upstream
// transports. It is immutable once on a context.
type Caller struct {
	// Principal is who is calling, as the transports name them.
	Principal identity.Principal
	// Client is the authenticated client's name.
	Client string
	// Subject and Issuer are the access token's sub and iss; "" for a
	// static token's client.
	Subject, Issuer string
	// Claims are the access token's claims; nil for a static token's
	// client. Read-only.
	Claims map[string]any
	// Token is the caller's access token, zero for a static token's
	// client: what a token exchange trades for an upstream's token.
	Token Secret
}

// NewCaller builds the Caller of an authenticated client from its access
// token's claims (nil for a static token) and the token itself.
func NewCaller(client string, claims map[string]any, token string) *Caller {
	c := &Caller{Principal: identity.Client(client), Client: client, Claims: claims, Token: NewSecret(token)}
	c.Subject, _ = claims["sub"].(string)
	c.Issuer, _ = claims["iss"].(string)
	return c
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the Caller on ctx, nil when there is none (stdio, a
// gateway without http.auth, work no client asked for).
func CallerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Value returns the part of c that what names (config.PrincipalSubject,
// PrincipalClient, PrincipalIssuer, or PrincipalClaimPrefix and a claim's
// name), as a header carries it: a string claim as it is, a number or a
// boolean as JSON writes it. ok is false when c has no such part, or one
// a header cannot carry (a list, an object, a control character, more
// than 4 KiB): the header is then left out rather than sent wrong.
func (c *Caller) Value(what string) (string, bool) {
	if c == nil {
		return "", false
	}
	var v string
	switch what {
	case config.PrincipalSubject:
		v = c.Subject
	case config.PrincipalClient:
		v = c.Client
	case config.PrincipalIssuer:
		v = c.Issuer
	default:
		name, ok := strings.CutPrefix(what, config.PrincipalClaimPrefix)
		if !ok {
			return "", false
		}
		switch claim := c.Claims[name].(type) {
		case string:
			v = claim
		case bool:
			v = strconv.FormatBool(claim)
		case float64, json.Number, int64, int:
			b, err := json.Marshal(claim)
			if err != nil {
				return "", false
			}
			v = string(b)
		default:
			return "", false
		}
	}
	if v == "" || len(v) > maxHeaderValue || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", false
	}
	return v, true
}
