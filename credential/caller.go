package credential

import (
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

// Value returns the part of the caller c that what names (config.PrincipalSubject,
// PrincipalClient, PrincipalIssuer, or PrincipalClaimPrefix and a claim's
// name), as a header carries it: a string claim as it is, a number or a
// boolean as JSON writes it. ok is false when c has no such part, or one
// a header cannot carry (a list, an object, a control character, more
// than 4 KiB): the header is then left out rather than sent wrong.
func Value(c identity.Caller, what string) (string, bool) {
	var v string
	switch what {
	case config.PrincipalSubject:
		if c.Principal.Kind == identity.KindSubject {
			v = c.Principal.Subject
		}
	case config.PrincipalClient:
		v = c.Client
	case config.PrincipalIssuer:
		if c.Principal.Kind == identity.KindSubject {
			v = c.Principal.Issuer
		}
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
