package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Protocol 2026-07-28 is sessionless: there is no initialize handshake. A
// client names its protocol version, identity and capabilities in the _meta
// of every request, learns the server's capabilities with server/discover,
// and over HTTP mirrors the method (and the tool, prompt or resource it
// acts on) in the Mcp-Method and Mcp-Name headers. A server that needs
// input in the middle of a request does not send requests of its own: it
// answers input_required (see inputrequired.go).

// Modern reports whether version belongs to the sessionless generation
// (2026-07-28 and later; versions are dates and sort as strings).
func Modern(version string) bool { return version >= "2026-07-28" }

// Well-known _meta keys of the sessionless generation.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// envelope is what every request of the aggregator to a sessionless
// upstream carries in its _meta, each member already encoded, in a fixed
// order.
type envelope []envelopeMember

type envelopeMember struct {
	key   string
	value json.RawMessage
}

func newEnvelope(version, name, ver string) envelope {
	info, _ := rawjson.Marshal(map[string]string{"name": name, "version": ver})
	v, _ := rawjson.Marshal(version)
	return envelope{{metaProtocolVersion, v}, {metaClientInfo, info}, {metaClientCapabilities, clientCapabilities}}
}

// wrap returns params with the envelope's members set in its _meta; the
// caller's own _meta members (a progress token) and every other byte stay.
func (e envelope) wrap(params json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	out, ok := setMember(params, "_meta", func(meta []byte) []byte {
		if meta == nil || len(meta) == 0 || meta[0] != '{' {
			meta = []byte(`{}`)
		}
		for _, m := range e {
			if next, ok := setMember(meta, m.key, func([]byte) []byte { return m.value }); ok {
				meta = next
			}
		}
		return meta
	})
	if !ok {
		return nil, fmt.Errorf("params are not a JSON object; protocol 2026-07-28 needs one to carry _meta")
	}
	return out, nil
}

// rawParams encodes what a caller passes as params (nil, raw JSON, or a
// value to encode).
func rawParams(params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	default:
		return rawjson.Marshal(p)
	}
}

// standardHeaders are the Mcp-Method and Mcp-Name headers of a request.
func standardHeaders(version, method string, params json.RawMessage) http.Header {
	h := http.Header{}
	for k, v := range mcp.StandardHeaders(version, mcp.MCPMethod(method), params) {
		h.Set(k, v)
	}
	return h
}

// discover is the sessionless generation's start: server/discover, whose
// result names the versions the upstream speaks and its capabilities.
func (i *Instance) discover(ctx context.Context, srv *config.Server, version, name, ver string) error {
	rc, ok := i.conn.(*remoteConn)
	if !ok || srv.Transport != config.TransportHTTP {
		return fmt.Errorf("server %q: protocol %s is supported for streamable_http upstreams only; set protocol: %s (or auto)", i.server, version, DefaultProtocol)
	}
	rc.speakModern(version, newEnvelope(version, name, ver))
	raw, err := i.conn.call(ctx, "server/discover", nil)
	if err != nil {
		return fmt.Errorf("server %q: server/discover: %w; if the server does not speak protocol %s, set protocol: %s", i.server, i.explain(ctx, err), version, DefaultProtocol)
	}
	var res struct {
		Supported    []string        `json:"supportedVersions"`
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("server %q: server/discover: malformed result: %v", i.server, err)
	}
	if !slices.Contains(res.Supported, version) {
		return fmt.Errorf("server %q: it does not speak protocol %s (it speaks %s); set protocol to one of those", i.server, version, strings.Join(res.Supported, ", "))
	}
	i.protocol = version
	i.caps = parseCapabilities(res.Capabilities)
	return nil
}
