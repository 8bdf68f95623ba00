package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on what the gateway fetches from the authorization server.
const (
	maxDocumentBytes = 1 << 20 // a metadata document or a JWK Set
	fetchTimeout     = 10 * time.Second
	maxRedirects     = 3
)

// errUnknownKey is a token signed by a key the issuer's JWK Set does not
// hold, even after a refetch (or while refetches are rate-limited).
var errUnknownKey = errors.New("the token is signed by a key the issuer does not publish")

// errNoKeys is the gateway not holding any of the issuer's keys because
// they could not be fetched: no token can be verified until they are.
var errNoKeys = errors.New("the issuer's signing keys could not be fetched")

// keySource holds the issuer's verification keys: found through its
// metadata (RFC 8414, else OpenID Connect discovery), fetched from its
// jwks_uri, and fetched again when a token names a key it does not hold,
// at most once per minRefetch.
type keySource struct {
	issuer     string
	client     *http.Client
	log        *slog.Logger
	now        func() time.Time
	minRefetch time.Duration // between two fetches caused by unknown keys
	maxAge     time.Duration // keys older than this are refetched on use

	fetches atomic.Int64 // completed fetch attempts, for tests and status

	mu    sync.Mutex // one fetch at a time; lookups of known keys never take it
	cache atomic.Pointer[keyCache]
}

// keyCache is one fetch's outcome. A failed fetch keeps the keys of the
// last good one.
type keyCache struct {
	keys    []publicKey
	fetched time.Time
	err     error // the last fetch's failure, nil when it succeeded
}

// lookup returns the key a token's header names, fetching the key set when
// it is missing, stale, or lacks kid.
func (s *keySource) lookup(ctx context.Context, kid, alg string) (crypto.PublicKey, error) {
	c := s.cache.Load()
	if c != nil && s.now().Sub(c.fetched) < s.maxAge {
		if k, ok := c.find(kid, alg); ok {
			return k, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c = s.cache.Load() // another request may have fetched meanwhile
	fresh := c != nil && s.now().Sub(c.fetched) < s.maxAge
	if fresh {
		if k, ok := c.find(kid, alg); ok {
			return k, nil
		}
	}
	wait := s.minRefetch
	if c != nil && c.err != nil {
		wait = min(wait, 10*time.Second) // an issuer that was down is retried sooner
	}
	if c != nil && s.now().Sub(c.fetched) < wait {
		if k, ok := c.find(kid, alg); ok {
			return k, nil
		}
		if c.err != nil && len(c.keys) == 0 {
			return nil, fmt.Errorf("%w: %w", errNoKeys, c.err)
		}
		return nil, errUnknownKey
	}
	c = s.refresh(ctx, c)
	if k, ok := c.find(kid, alg); ok {
		return k, nil
	}
	if c.err != nil && len(c.keys) == 0 {
		return nil, fmt.Errorf("%w: %w", errNoKeys, c.err)
	}
	return nil, errUnknownKey
}

// refresh fetches the key set and publishes the outcome. Callers hold mu.
func (s *keySource) refresh(ctx context.Context, old *keyCache) *keyCache {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	keys, err := s.fetch(ctx)
	s.fetches.Add(1)
	next := &keyCache{keys: keys, fetched: s.now()}
	if err != nil {
		s.log.Warn("cannot fetch the OAuth issuer's signing keys; tokens signed by keys not already known are refused",
			"issuer", s.issuer, "err", err, "fix", "check that the issuer is reachable and publishes jwks_uri in its metadata")
		next.err = err
		if old != nil {
			next.keys = old.keys
		}
	} else if old == nil || old.err != nil {
		s.log.Info("fetched the OAuth issuer's signing keys", "issuer", s.issuer, "keys", len(keys))
	}
	s.cache.Store(next)
	return next
}

// find returns the key with kid. A token without kid may use the only key
// of the set. A key that names its algorithm is used for that one only.
func (c *keyCache) find(kid, alg string) (crypto.PublicKey, bool) {
	if c == nil {
		return nil, false
	}
	var match *publicKey
	for i := range c.keys {
		k := &c.keys[i]
		if k.kid != kid || (k.alg != "" && k.alg != alg) {
			continue
		}
		if match != nil {
			return nil, false // two candidates: ambiguous, refuse
		}
		match = k
	}
	if match == nil && kid == "" && len(c.keys) == 1 && (c.keys[0].alg == "" || c.keys[0].alg == alg) {
		match = &c.keys[0]
	}
	if match == nil {
		return nil, false
	}
	return match.key, true
}

// fetch reads the issuer's metadata and then its JWK Set.
func (s *keySource) fetch(ctx context.Context) ([]publicKey, error) {
	jwksURI, err := s.jwksURI(ctx)
	if err != nil {
		return nil, err
	}
	data, err := s.get(ctx, jwksURI)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri %s: %w", jwksURI, err)
	}
	keys, skipped, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri %s: %w", jwksURI, err)
	}
	if skipped > 0 {
		s.log.Info("skipped keys of the OAuth issuer that cannot verify signatures here", "issuer", s.issuer, "skipped", skipped)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("jwks_uri %s holds no usable signing key (RSA of 2048 bits or more, EC P-256/384/521, Ed25519)", jwksURI)
	}
	return keys, nil
}

// metadataURLs are where the issuer's metadata may be, in order: RFC 8414
// (the well-known path inserted before the issuer's path), then OpenID
// Connect discovery (inserted, then appended), as the MCP authorization
// spec tries them.
func metadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("issuer %q is not a URL", issuer)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	base := u.Scheme + "://" + u.Host
	if path == "" {
		return []string{base + "/.well-known/oauth-authorization-server", base + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		base + "/.well-known/oauth-authorization-server" + path,
		base + "/.well-known/openid-configuration" + path,
		base + path + "/.well-known/openid-configuration",
	}, nil
}

// jwksURI finds jwks_uri in the first metadata document that exists. The
// document must name the configured issuer (RFC 8414 §3.3), or a
// look-alike server could hand out its own keys.
func (s *keySource) jwksURI(ctx context.Context) (string, error) {
	urls, err := metadataURLs(s.issuer)
	if err != nil {
		return "", err
	}
	var errs []string
	for _, u := range urls {
		data, err := s.get(ctx, u)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", u, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			return "", fmt.Errorf("%s: not a JSON metadata document: %v", u, err)
		}
		if meta.Issuer != s.issuer {
			return "", fmt.Errorf("%s names issuer %q, not the configured %q; set http.auth.oauth.issuer to exactly the issuer its tokens carry", u, meta.Issuer, s.issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("%s has no jwks_uri: this issuer does not publish keys to verify its tokens with", u)
		}
		if err := secureURL(meta.JWKSURI); err != nil {
			return "", fmt.Errorf("%s: jwks_uri: %v", u, err)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("no authorization server metadata found: %s", strings.Join(errs, "; "))
}

// secureURL accepts https, and http to a loopback host.
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("%q is not a URL", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q is not https", raw)
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// get fetches one document: status 200, at most maxDocumentBytes.
func (s *keySource) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDocumentBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxDocumentBytes)
	}
	return data, nil
}

// defaultClient fetches with a bounded time and follows a few redirects,
// never from https to anything less.
func defaultClient() *http.Client {
	return &http.Client{
		Timeout: fetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("a redirect from https to %q is not followed", req.URL.Redacted())
			}
			return secureURL(req.URL.String())
		},
	}
}
