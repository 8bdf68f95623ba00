package credential

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// tokenEndpoint is the configured token endpoint, or the one the issuer's
// metadata names, fetched once.
func (e *Exchanger) tokenEndpoint(ctx context.Context) (string, error) {
	e.endpointMu.Lock()
	defer e.endpointMu.Unlock()
	if e.endpoint != "" {
		return e.endpoint, nil
	}
	if e.opts.Issuer == "" {
		return "", fmt.Errorf("token exchange: neither a token endpoint nor an issuer is configured")
	}
	var errs []string
	for _, u := range metadataURLs(e.opts.Issuer) {
		endpoint, err := e.fetchEndpoint(ctx, u)
		if err == nil {
			e.endpoint = endpoint
			return endpoint, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("token exchange: no token endpoint found for issuer %s: %s", e.opts.Issuer, strings.Join(errs, "; "))
}

// metadataURLs are where an issuer's metadata may be: RFC 8414's
// well-known URL (inserted before the issuer's path), then OpenID
// discovery's (appended to it).
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	oauthMeta := *u
	oauthMeta.Path = "/.well-known/oauth-authorization-server" + path
	oidcMeta := *u
	oidcMeta.Path = path + "/.well-known/openid-configuration"
	return []string{oauthMeta.String(), oidcMeta.String()}
}

// fetchEndpoint reads the token_endpoint of the metadata at u, which must
// name the issuer itself (RFC 8414 §3.3).
func (e *Exchanger) fetchEndpoint(ctx context.Context, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := e.opts.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", u, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	var m struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxExchangeBody)).Decode(&m); err != nil {
		return "", fmt.Errorf("%s: not JSON metadata", u)
	}
	if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(e.opts.Issuer, "/") {
		return "", fmt.Errorf("%s names another issuer (%q)", u, printable(m.Issuer, 200))
	}
	t, err := url.Parse(m.TokenEndpoint)
	if err != nil || t.Host == "" || (t.Scheme != "https" && !(t.Scheme == "http" && loopback(t.Hostname()))) {
		return "", fmt.Errorf("%s: token_endpoint %q is not an https URL", u, printable(m.TokenEndpoint, 200))
	}
	return m.TokenEndpoint, nil
}

// loopback reports whether host is a loopback name or address, where
// plain http stays on the machine.
func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1" || strings.HasPrefix(host, "127.")
}
