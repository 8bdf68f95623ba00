package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

// Logout ends the stored logins of srv in store: it revokes each one's
// tokens at their issuer (RFC 7009), where the issuer offers that, and
// removes them. The local copy goes even when a revocation fails: warnings
// say which tokens may stay valid at their issuer, and why. removed is how
// many logins were removed; err, that they could not be.
func Logout(ctx context.Context, store *oauth.Store, srv *config.Server) (removed int, warnings []string, err error) {
	grants, err := store.LoadAll(srv.URL)
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("%v; the files are removed without revoking their tokens", err))
	}
	client := &http.Client{Timeout: oauth.RevokeTimeout}
	for _, g := range grants {
		switch err := oauth.Revoke(ctx, client, g); {
		case errors.Is(err, oauth.ErrNoRevocation):
			warnings = append(warnings, fmt.Sprintf("%s cannot revoke tokens; they stay valid there until they expire", issuerName(g)))
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("could not revoke the tokens at %s (%v); they may stay valid there until they expire or you revoke the access there", issuerName(g), err))
		}
	}
	removed, err = store.RemoveAll(srv.URL)
	return removed, warnings, err
}

// issuerName names a grant's issuer in a message.
func issuerName(g *oauth.Grant) string {
	if g.Issuer == "" {
		return "the authorization server"
	}
	return "the authorization server " + g.Issuer
}
