package naming

import "strings"

// AppScheme is the scheme of MCP Apps resources (the io.modelcontextprotocol/ui
// extension): HTML a host renders for a tool whose _meta.ui.resourceUri names it.
const AppScheme = "ui://"

// IsAppURI reports whether uri is a ui:// resource URI.
func IsAppURI(uri string) bool {
	return len(uri) >= len(AppScheme) && strings.EqualFold(uri[:len(AppScheme)], AppScheme)
}

// AppURI is the name under which server's app resource uri is exported:
// ui://<server>/<the rest of uri>, so that two servers (or one behind two
// server entries) that both serve ui://main never collide. A URI that is
// not a ui:// one is returned unchanged.
func AppURI(server, uri string) string {
	if !IsAppURI(uri) {
		return uri
	}
	return AppScheme + server + "/" + uri[len(AppScheme):]
}

// AppOriginal maps an exported app resource URI back: the server it names
// and the URI that server serves. ok is false for a URI that is not an
// exported app resource URI (not ui://, or with no server part).
func AppOriginal(uri string) (server, original string, ok bool) {
	if !IsAppURI(uri) {
		return "", "", false
	}
	rest := uri[len(AppScheme):]
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], AppScheme + rest[i+1:], true
}
