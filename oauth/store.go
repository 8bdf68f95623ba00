package oauth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Grant is what one login obtained for one server: the access and refresh
// tokens, and what refreshing them needs (the issuer's token endpoint, the
// client and the resource). It is stored as JSON, one file per server URL
// and issuer.
type Grant struct {
	Server        string    `json:"server"`   // the MCP endpoint the tokens are for (with Issuer, the file's key)
	Resource      string    `json:"resource"` // RFC 8707 resource indicator sent with every token request
	Issuer        string    `json:"issuer"`   // the authorization server that issued them (the file's key too)
	TokenURL      string    `json:"token_endpoint"`
	RevocationURL string    `json:"revocation_endpoint,omitempty"` // RFC 7009; "": none known at login
	ClientID      string    `json:"client_id"`
	ClientSecret  string    `json:"client_secret,omitempty"`
	AuthStyle     AuthStyle `json:"token_endpoint_auth_method,omitempty"`
	Scopes        []string  `json:"scopes,omitempty"`
	AccessToken   string    `json:"access_token"`
	TokenType     string    `json:"token_type,omitempty"`
	RefreshToken  string    `json:"refresh_token,omitempty"`
	Expiry        time.Time `json:"expiry,omitzero"`   // zero: the issuer gave no lifetime
	Obtained      time.Time `json:"obtained,omitzero"` // when AccessToken was issued
}

// AuthStyle is how the client authenticates at the token endpoint, as
// RFC 7591 names it.
type AuthStyle string

// Client authentication methods.
const (
	AuthNone  AuthStyle = "none"
	AuthBasic AuthStyle = "client_secret_basic"
	AuthPost  AuthStyle = "client_secret_post"
)

// sameTokens reports whether two grants hold the same tokens.
func (g *Grant) sameTokens(o *Grant) bool {
	if g == nil || o == nil {
		return g == o
	}
	return g.AccessToken == o.AccessToken && g.RefreshToken == o.RefreshToken && g.ClientID == o.ClientID
}

// secrets are the values of g that must never be shown.
func (g *Grant) secrets() []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, s := range []string{g.AccessToken, g.RefreshToken, g.ClientSecret} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// maxGrantFile bounds a grant file: a few tokens and URLs, far below this.
const maxGrantFile = 256 << 10

// Store keeps grants in one directory (mode 0700), one file per server URL
// and issuer (mode 0600), each written whole to a temporary file and renamed over the
// old one, so that a reader never sees half a file.
type Store struct {
	dir string
}

// NewStore returns the store in dir; the directory is created when a grant
// is first saved.
func NewStore(dir string) *Store { return &Store{dir: dir} }

// DefaultDir is where grants live: mcp-aggregator/ in the user's config
// directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config on Linux,
// ~/Library/Application Support on macOS, %AppData% on Windows).
func DefaultDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config directory to keep OAuth tokens in (%v); set HOME or XDG_CONFIG_HOME", err)
	}
	return filepath.Join(base, "mcp-aggregator"), nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// maxGrantsPerServer bounds how many stored logins (one per issuer) are
// read for one server URL.
const maxGrantsPerServer = 32

// IssuerKey is the form of an issuer identifier grants are keyed by: RFC
// 8414 compares issuers exactly, but metadata often differs from the
// advertised URL by a trailing slash alone.
func IssuerKey(issuer string) string { return strings.TrimSuffix(issuer, "/") }

// urlPrefix starts the names of every file of serverURL: a hash of the URL,
// so that the name shows nothing of it and two URLs never share a file.
func (s *Store) urlPrefix(serverURL string) string {
	sum := sha256.Sum256([]byte(serverURL))
	return "oauth-" + hex.EncodeToString(sum[:16])
}

// Path is the file that holds the grant for serverURL issued by issuer:
// one file per (URL, issuer) pair, so that a login with a server's new
// authorization server leaves the old one's grant alone, and the old
// grant is never taken for the new issuer's.
func (s *Store) Path(serverURL, issuer string) string {
	sum := sha256.Sum256([]byte(IssuerKey(issuer)))
	return filepath.Join(s.dir, s.urlPrefix(serverURL)+"-"+hex.EncodeToString(sum[:8])+".json")
}

// lockPath is the lock file taken while a grant for serverURL is
// refreshed.
func (s *Store) lockPath(serverURL string) string {
	return filepath.Join(s.dir, s.urlPrefix(serverURL)+".lock")
}

// ErrNoGrant is returned by Load when no grant is stored for a server.
var ErrNoGrant = errors.New("no stored login")

// Load reads the grant for serverURL from issuer; ErrNoGrant when there is
// none. A file that is not a grant for that pair, or that others may read,
// is an error that says how to fix it.
func (s *Store) Load(serverURL, issuer string) (*Grant, error) {
	g, err := s.loadFile(s.Path(serverURL, issuer))
	if err != nil {
		return nil, err
	}
	if g.Server != serverURL || IssuerKey(g.Issuer) != IssuerKey(issuer) {
		return nil, fmt.Errorf("stored login %s is for another server or issuer; log in again", s.Path(serverURL, issuer))
	}
	return g, nil
}

// LoadAll reads every grant stored for serverURL, whatever its issuer,
// newest first; none is no error. A file that cannot be read is an error.
func (s *Store) LoadAll(serverURL string) ([]*Grant, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read stored logins in %s: %w", s.dir, err)
	}
	prefix := s.urlPrefix(serverURL) + "-"
	var out []*Grant
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if len(out) == maxGrantsPerServer {
			return nil, fmt.Errorf("more than %d stored logins for one server in %s; run mcp-aggregator logout for it and log in again", maxGrantsPerServer, s.dir)
		}
		path := filepath.Join(s.dir, e.Name())
		g, err := s.loadFile(path)
		if errors.Is(err, ErrNoGrant) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		if g.Server != serverURL || path != s.Path(serverURL, g.Issuer) {
			return nil, fmt.Errorf("stored login %s is for another server or issuer; remove it, or log in again", path)
		}
		out = append(out, g)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Obtained.After(out[j].Obtained) })
	return out, nil
}

// loadFile reads and checks one grant file.
func (s *Store) loadFile(path string) (*Grant, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoGrant
	}
	if err != nil {
		return nil, fmt.Errorf("read stored login %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 && !isWindows() {
		return nil, fmt.Errorf("stored login %s may be read by other users (mode %v); run chmod 600 on it, or log in again", path, st.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxGrantFile+1))
	if err != nil {
		return nil, fmt.Errorf("read stored login %s: %w", path, err)
	}
	g, err := decodeGrant(data)
	if err != nil {
		return nil, fmt.Errorf("stored login %s: %v; log in again", path, err)
	}
	return g, nil
}

// decodeGrant parses and checks a grant file.
func decodeGrant(data []byte) (*Grant, error) {
	if len(data) > maxGrantFile {
		return nil, fmt.Errorf("larger than %d bytes", maxGrantFile)
	}
	var g Grant
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, errors.New("not valid JSON")
	}
	switch {
	case g.Server == "":
		return nil, errors.New("names no server")
	case g.AccessToken == "" && g.RefreshToken == "":
		return nil, errors.New("holds no token")
	case g.RefreshToken != "" && (g.TokenURL == "" || g.ClientID == ""):
		return nil, errors.New("has a refresh token but no token endpoint or client")
	}
	return &g, nil
}

// Save writes g for g.Server and g.Issuer: to a temporary file in the same directory
// (mode 0600), synced, then renamed over the old file.
func (s *Store) Save(g *Grant) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create %s for OAuth tokens: %w", s.dir, err)
	}
	// MkdirAll leaves an existing directory's mode alone: tighten it, as
	// the directory's listing names which servers have logins.
	if err := os.Chmod(s.dir, 0o700); err != nil && !isWindows() {
		return fmt.Errorf("restrict %s to its owner: %w", s.dir, err)
	}
	data, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	path := s.Path(g.Server, g.Issuer)
	tmp, err := os.CreateTemp(s.dir, ".oauth-*.tmp")
	if err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := tmp.Chmod(0o600); err != nil && !isWindows() {
		tmp.Close()
		return fmt.Errorf("save login: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save login: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save login: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	return nil
}

// Remove deletes the grant for serverURL from issuer. It reports whether
// there was one.
func (s *Store) Remove(serverURL, issuer string) (bool, error) {
	err := os.Remove(s.Path(serverURL, issuer))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remove stored login: %w", err)
	}
	return true, nil
}

// RemoveAll deletes every grant for serverURL, whatever its issuer, and
// its lock file. It reports how many there were.
func (s *Store) RemoveAll(serverURL string) (int, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remove stored logins: %w", err)
	}
	prefix := s.urlPrefix(serverURL) + "-"
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("remove stored login: %w", err)
		}
		n++
	}
	_ = os.Remove(s.lockPath(serverURL)) // may never have been taken
	return n, nil
}

// isGrantFile reports whether a directory entry's name is a grant file.
func isGrantFile(name string) bool {
	return strings.HasPrefix(name, "oauth-") && strings.HasSuffix(name, ".json")
}
