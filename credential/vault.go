package credential

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sealed"
)

// Bounds of the vault.
const (
	maxVaultEntry = 1 << 20 // an entry's file, sealed
	maxKeyFile    = 4096    // a key file's size
)

// sealedSuffix ends the name of every entry's file.
const sealedSuffix = ".sealed"

// ErrNotStored is the error of Vault.Get for an entry that is not there.
var ErrNotStored = errors.New("no credentials stored")

// VaultEntry names one caller's credentials for one upstream server: by
// its principal, which for an OAuth user is the issuer and subject of its
// token, so that two users who sign in through one OAuth client never
// share an entry.
type VaultEntry struct {
	Server    string
	Principal identity.Principal
}

// EntryOf names c's credentials for server.
func EntryOf(server string, c identity.Caller) VaultEntry {
	return VaultEntry{Server: server, Principal: c.Principal}
}

// id is the entry as one unambiguous text: the file's name is its digest,
// and it is the sealed data's associated data, so that an entry's file
// renamed to another's does not open.
func (e VaultEntry) id() string {
	return strings.Join([]string{"v1", e.Server, e.Principal.String()}, "\x00")
}

// Vault keeps each caller's credentials for upstream servers (the tokens
// of a per-user login) in files of a directory, each sealed with
// AES-256-GCM under a key the operator provides: a copy of the directory
// tells nothing without the key, not even whose entries it holds. Its
// methods are safe for concurrent use; a write replaces an entry whole.
type Vault struct {
	dir  string
	aead cipher.AEAD
	max  int        // entries kept at most; 0: no bound
	mu   sync.Mutex // makes the count and the write of a new entry one step
}

// ErrVaultFull is the error of Vault.Put for a new entry while the vault
// holds as many as it may.
var ErrVaultFull = errors.New("the store of per-user logins is full")

// SetMax bounds the entries the vault keeps: Put refuses a new one
// (ErrVaultFull) once it holds max; 0 takes the bound away.
func (v *Vault) SetMax(max int) { v.max = max }

// NewVault returns the vault in dir (made, mode 0700, when missing)
// sealed with key, 32 bytes.
func NewVault(dir string, key []byte) (*Vault, error) {
	if len(key) != sealed.KeySize {
		return nil, fmt.Errorf("the vault key must be %d bytes (AES-256), not %d", sealed.KeySize, len(key))
	}
	aead, err := sealed.NewAEAD(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the vault directory: %w", err)
	}
	return &Vault{dir: dir, aead: aead}, nil
}

func (v *Vault) path(e VaultEntry) string {
	sum := sha256.Sum256([]byte(e.id()))
	return filepath.Join(v.dir, hex.EncodeToString(sum[:])+sealedSuffix)
}

// Put stores data as e's credentials, replacing what was there; a new
// entry over the bound (SetMax) is refused with ErrVaultFull.
func (v *Vault) Put(e VaultEntry, data []byte) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.max > 0 {
		if _, err := os.Stat(v.path(e)); errors.Is(err, fs.ErrNotExist) {
			if n, err := v.count(); err != nil {
				return err
			} else if n >= v.max {
				return fmt.Errorf("%w (%d logins, http.auth.user_logins.max_logins); raise max_logins, or lower max_unused so that unused logins are removed sooner", ErrVaultFull, n)
			}
		}
	}
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := v.aead.Seal(nonce, nonce, data, []byte(e.id()))
	if len(sealed) > maxVaultEntry {
		return fmt.Errorf("credentials of %d bytes are more than the vault keeps", len(data))
	}
	tmp, err := os.CreateTemp(v.dir, ".entry-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing left to remove
	if _, err := tmp.Write(sealed); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), v.path(e))
}

// Get returns e's credentials; ErrNotStored when there are none. An entry
// that does not open (another key, a damaged or moved file) is an error
// that says so, and never shows the file's contents.
func (v *Vault) Get(e VaultEntry) ([]byte, error) {
	f, err := os.Open(v.path(e))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotStored
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sealed, err := io.ReadAll(io.LimitReader(f, maxVaultEntry+1))
	if err != nil {
		return nil, err
	}
	n := v.aead.NonceSize()
	if len(sealed) > maxVaultEntry || len(sealed) < n+v.aead.Overhead() {
		return nil, errors.New("a stored entry is damaged; the caller must log in again")
	}
	data, err := v.aead.Open(nil, sealed[:n], sealed[n:], []byte(e.id()))
	if err != nil {
		return nil, errors.New("a stored entry does not open with the vault key (another key, or a damaged file); the caller must log in again")
	}
	return data, nil
}

// count is the number of entries stored.
func (v *Vault) count() (int, error) {
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range entries {
		if strings.HasSuffix(d.Name(), sealedSuffix) {
			n++
		}
	}
	return n, nil
}

// Len is the number of entries stored.
func (v *Vault) Len() (int, error) { return v.count() }

// Touch notes that e's credentials were used now: Sweep keeps an entry by
// the last time it was written or touched. None stored is no error.
func (v *Vault) Touch(e VaultEntry) error {
	now := time.Now()
	err := os.Chtimes(v.path(e), now, now)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Sweep removes the entries neither written nor touched since before, and
// reports how many it removed. A file whose name the vault does not give
// its entries is left alone.
func (v *Vault) Sweep(before time.Time) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range entries {
		if !strings.HasSuffix(d.Name(), sealedSuffix) || !d.Type().IsRegular() {
			continue
		}
		info, err := d.Info()
		if err != nil || !info.ModTime().Before(before) {
			continue
		}
		if err := os.Remove(filepath.Join(v.dir, d.Name())); err == nil {
			n++
		}
	}
	return n, nil
}

// Delete removes e's credentials; none stored is no error.
func (v *Vault) Delete(e VaultEntry) error {
	err := os.Remove(v.path(e))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ParseKey reads a vault key as an operator writes it (sealed.DecodeKey):
// 64 hex digits, or the base64 of 32 bytes; surrounding space is ignored.
// The error never quotes the text.
func ParseKey(text string) ([]byte, error) {
	key, err := sealed.DecodeKey(text)
	if err != nil {
		return nil, fmt.Errorf("the vault key: %v; it must be 32 random bytes written as 64 hex digits or in base64 (e.g. `openssl rand -base64 32`)", err)
	}
	return key, nil
}

// ReadKeyFile reads a vault key from path (ParseKey's forms), refusing a
// file others than its owner may read.
func ReadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the vault key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the vault key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("the vault key file %s is not a regular file", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the vault key file %s may be read by others than its owner (mode %04o); chmod 600 it", path, info.Mode().Perm())
	}
	text, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("the vault key file: %w", err)
	}
	key, err := ParseKey(string(text))
	if err != nil {
		return nil, fmt.Errorf("the vault key file %s: %w", path, err)
	}
	return key, nil
}
