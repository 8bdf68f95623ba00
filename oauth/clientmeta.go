package oauth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document,
// the first way of identifying a client in the 2026-07-28 MCP authorization
// spec): the client's OAuth client_id is an https URL, and the document at
// that URL describes the client. The authorization server fetches it when
// the client first names it; nothing is registered.

// ClientIDMetadataMaxAge is how long an authorization server may cache a
// document the gateway serves (Cache-Control max-age), in seconds: a change
// of the config reaches it within that time.
const ClientIDMetadataMaxAge = 3600

// RedirectURIs are the redirect URIs the client ID metadata document lists:
// the loopback listener of a login, whose port changes with every login
// (an authorization server allows any port on a loopback redirect URI, RFC
// 8252 §7.3).
func RedirectURIs() []string { return []string{"http://127.0.0.1" + callbackPath} }

// ClientMetadata is the client ID metadata document for clientIDURL, with
// the client name name ("" for config.DefaultClientName): a public native
// client that uses the authorization code grant with refresh tokens.
func ClientMetadata(clientIDURL, name string) []byte {
	if name == "" {
		name = config.DefaultClientName
	}
	doc := struct {
		ClientID                string   `json:"client_id"`
		ClientName              string   `json:"client_name"`
		RedirectURIs            []string `json:"redirect_uris"`
		GrantTypes              []string `json:"grant_types"`
		ResponseTypes           []string `json:"response_types"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
		ApplicationType         string   `json:"application_type"`
		SoftwareID              string   `json:"software_id"`
	}{
		ClientID: clientIDURL, ClientName: name, RedirectURIs: RedirectURIs(),
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: string(AuthNone), ApplicationType: "native", SoftwareID: "mcp-aggregator",
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(doc) // strings and lists of strings only
	return buf.Bytes()
}

// ClientDocuments serves the client ID metadata documents of the config
// (config.Workspace.ClientIDURLs), each at the path of its URL, for an
// authorization server to fetch; every other path is not found. The zero
// value serves none; Set replaces them, as the config reloads.
type ClientDocuments struct {
	docs atomic.Pointer[map[string][]clientDoc] // by URL path
}

type clientDoc struct {
	host string // the URL's host, to choose between URLs of one path
	body []byte
	etag string
}

// Set makes d serve the documents of urls (URL -> client name), and
// reports whether that changed what it serves.
func (d *ClientDocuments) Set(urls map[string]string) bool {
	m := map[string][]clientDoc{}
	keys := make([]string, 0, len(urls))
	for k := range urls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, raw := range keys {
		u, err := url.Parse(raw)
		if err != nil || config.CheckClientIDURL(raw) != nil {
			continue
		}
		body := ClientMetadata(raw, urls[raw])
		sum := sha256.Sum256(body)
		m[u.Path] = append(m[u.Path], clientDoc{host: strings.ToLower(u.Host), body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`})
	}
	old := d.docs.Swap(&m)
	return !sameDocs(old, &m)
}

// sameDocs reports whether a and b serve the same documents; nil serves none.
func sameDocs(a, b *map[string][]clientDoc) bool {
	var x, y map[string][]clientDoc
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	if len(x) != len(y) {
		return false
	}
	for path, docs := range x {
		other := y[path]
		if len(other) != len(docs) {
			return false
		}
		for i := range docs {
			if docs[i].etag != other[i].etag {
				return false
			}
		}
	}
	return true
}

func (d *ClientDocuments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := d.docs.Load()
	var docs []clientDoc
	if m != nil {
		docs = (*m)[r.URL.Path]
	}
	if len(docs) == 0 {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the client ID metadata document is read with GET", http.StatusMethodNotAllowed)
		return
	}
	doc := docs[0]
	for _, c := range docs {
		if c.host == strings.ToLower(r.Host) {
			doc = c
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(ClientIDMetadataMaxAge))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", doc.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(doc.body))
}
