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
	"strings"
	"time"
)

// Grant is what one login obtained for one server: the access and refresh
// tokens, and what refreshing them needs (the issuer's token endpoint, the
// client and the resource). It is stored as JSON, one file per server URL.
type Grant struct {
	Server       string    `json:"server"`   // the MCP endpoint the tokens are for (the file's key)
	Resource     string    `json:"resource"` // RFC 8707 resource indicator sent with every token request
	Issuer       string    `json:"issuer"`   // the authorization server that issued them
	TokenURL     string    `json:"token_endpoint"`
	ClientID     string    `json:"client_id"`
	ClientSecret string    `json:"client_secret,omitempty"`
	AuthStyle    AuthStyle `json:"token_endpoint_auth_method,omitempty"`
	Scopes       []string  `json:"scopes,omitempty"`
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`   // zero: the issuer gave no lifetime
	Obtained     time.Time `json:"obtained,omitzero"` // when AccessToken was issued
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
// (mode 0600), each written whole to a temporary file and renamed over the
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

// Path is the file that holds the grant for serverURL: named after a hash
// of the URL, so that the name shows nothing of it and two URLs never share
// a file.
func (s *Store) Path(serverURL string) string {
	sum := sha256.Sum256([]byte(serverURL))
	return filepath.Join(s.dir, "oauth-"+hex.EncodeToString(sum[:16])+".json")
}

// lockPath is the lock file taken while the grant for serverURL is
// refreshed.
func (s *Store) lockPath(serverURL string) string {
	return strings.TrimSuffix(s.Path(serverURL), ".json") + ".lock"
}

// ErrNoGrant is returned by Load when no grant is stored for a server.
var ErrNoGrant = errors.New("no stored login")

// Load reads the grant for serverURL; ErrNoGrant when there is none. A file
// that is not a grant for serverURL, or that others may read, is an error
// that says how to fix it.
func (s *Store) Load(serverURL string) (*Grant, error) {
	path := s.Path(serverURL)
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
	if g.Server != serverURL {
		return nil, fmt.Errorf("stored login %s is for another server; log in again", path)
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

// Save writes g for g.Server: to a temporary file in the same directory
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
	path := s.Path(g.Server)
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

// Remove deletes the grant for serverURL. It reports whether there was one.
func (s *Store) Remove(serverURL string) (bool, error) {
	err := os.Remove(s.Path(serverURL))
	_ = os.Remove(s.lockPath(serverURL)) // may never have been taken
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remove stored login: %w", err)
	}
	return true, nil
}

// isGrantFile reports whether a directory entry's name is a grant file.
func isGrantFile(name string) bool {
	return strings.HasPrefix(name, "oauth-") && strings.HasSuffix(name, ".json")
}
