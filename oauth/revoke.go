package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Written by hand: golang.org/x/oauth2 does not revoke tokens (RFC 7009).

// RevokeTimeout bounds the revocation of one grant, metadata included.
const RevokeTimeout = 15 * time.Second

// ErrNoRevocation is returned by Revoke when the issuer has no revocation
// endpoint: its tokens live until they expire.
var ErrNoRevocation = errors.New("the authorization server offers no token revocation (RFC 7009)")

// Revoke asks g's issuer to revoke its refresh token, then its access
// token, at the issuer's revocation endpoint (RFC 7009): the one noted at
// login, else the one its metadata names now. It stops at the first
// failure; no error text holds a token.
func Revoke(ctx context.Context, client *http.Client, g *Grant) error {
	ctx, cancel := context.WithTimeout(ctx, RevokeTimeout)
	defer cancel()
	endpoint := g.RevocationURL
	if endpoint == "" {
		if g.Issuer == "" {
			return ErrNoRevocation
		}
		asm, err := getServerMetadata(ctx, client, g.Issuer)
		if err != nil {
			return fmt.Errorf("reading the metadata of %s: %w", safeText(g.Issuer), err)
		}
		if asm == nil || asm.RevocationEndpoint == "" {
			return ErrNoRevocation
		}
		endpoint = asm.RevocationEndpoint
	}
	if u, err := url.Parse(endpoint); err != nil {
		return fmt.Errorf("the revocation endpoint is not a URL")
	} else if err := webURL(u); err != nil {
		return fmt.Errorf("the revocation endpoint %s %w; tokens are sent only over https (or http on loopback)", safeCode(u.Redacted()), err)
	}
	for _, t := range []struct{ token, hint string }{{g.RefreshToken, "refresh_token"}, {g.AccessToken, "access_token"}} {
		if t.token == "" {
			continue
		}
		if err := revokeOne(ctx, client, endpoint, g, t.token, t.hint); err != nil {
			return fmt.Errorf("revoking the %s: %w", strings.ReplaceAll(t.hint, "_", " "), err)
		}
	}
	return nil
}

// revokeOne sends one revocation request, authenticated as the client is
// at the token endpoint.
func revokeOne(ctx context.Context, client *http.Client, endpoint string, g *Grant, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	req, err := clientPost(ctx, endpoint, form, g)
	if err != nil {
		return fmt.Errorf("revocation endpoint: %w", err)
	}
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		return plainErr(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode == http.StatusOK {
		return nil // RFC 7009 §2.2: also when the token was no longer valid
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("the revocation endpoint answered HTTP %d with error %s", resp.StatusCode, safeCode(e.Error))
	}
	return fmt.Errorf("the revocation endpoint answered HTTP %d", resp.StatusCode)
}

// clientPost is a POST of form to endpoint, a JSON answer accepted, with the
// credentials of g's client in form or in a Basic header (clientAuth).
func clientPost(ctx context.Context, endpoint string, form url.Values, g *Grant) (*http.Request, error) {
	basic := clientAuth(form, g)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 §2.3.1: both are form-encoded before Basic encoding.
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	return req, nil
}

// clientAuth puts the client's credentials in form, as g's token endpoint
// takes them, and reports whether they go in a Basic header instead.
func clientAuth(form url.Values, g *Grant) (basic bool) {
	if g.ClientSecret != "" && g.AuthStyle != AuthPost {
		return true
	}
	form.Set("client_id", g.ClientID)
	if g.ClientSecret != "" {
		form.Set("client_secret", g.ClientSecret)
	}
	return false
}

// plainErr drops a *url.Error's URL and method, which would repeat the
// endpoint (and could hold secrets), keeping its cause.
func plainErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
