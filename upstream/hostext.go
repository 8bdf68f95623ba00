package upstream

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// carriedExtensions are the client-side extensions a host may declare that
// the aggregator carries between it and an upstream: those whose messages
// and results it relays and rewrites as they need (MCP Apps: its ui://
// resources and tool _meta). An extension not named here is left out of
// what an upstream is told of a host: the aggregator would not carry what
// the upstream then does with it.
var carriedExtensions = map[string]bool{"io.modelcontextprotocol/ui": true}

// defaultExtensions is the extensions member of clientCapabilities, what a
// shared instance, or one started before its host is known, declares.
var defaultExtensions = func() json.RawMessage {
	var caps struct {
		Extensions json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(clientCapabilities, &caps)
	return caps.Extensions
}()

type hostExtensionsKey struct{}

// ForHost returns ctx marked with the client-side extensions a host
// declared in capabilities (its initialize capabilities, or a 2026-07-28
// request's clientCapabilities): an instance Start starts under ctx is
// leased to that host alone, and declares the host's own settings of the
// extensions the aggregator carries in place of the aggregator's, and none
// the host did not declare. Other capabilities are still the aggregator's.
func ForHost(ctx context.Context, capabilities json.RawMessage) context.Context {
	return context.WithValue(ctx, hostExtensionsKey{}, HostExtensions(capabilities))
}

// HostExtensions is the extensions object (never nil; {} when none) of
// capabilities, less every extension the aggregator does not carry, and
// those the host declared null or false. Malformed capabilities declare
// none.
func HostExtensions(capabilities json.RawMessage) json.RawMessage {
	kept, ok := rawjson.Keep(rawjson.Member(capabilities, "extensions"), func(id string, settings []byte) bool {
		// Settings are an object; null, false or anything else declares nothing.
		return carriedExtensions[id] && settings[0] == '{'
	})
	if !ok {
		return json.RawMessage(`{}`)
	}
	return kept
}

// hostExtensions is the extensions ctx was marked with by ForHost, and
// whether it was.
func hostExtensions(ctx context.Context) (json.RawMessage, bool) {
	ext, ok := ctx.Value(hostExtensionsKey{}).(json.RawMessage)
	return ext, ok
}

// capabilitiesFor is the client capabilities an instance started under ctx
// declares, and the extensions among them ({} for none).
func capabilitiesFor(ctx context.Context) (caps, extensions json.RawMessage) {
	ext, ok := hostExtensions(ctx)
	if !ok {
		return clientCapabilities, defaultExtensions
	}
	caps = rawjson.Edits(clientCapabilities, rawjson.Edit{Name: "extensions", Value: func([]byte) []byte {
		if rawjson.Empty(ext) {
			return nil
		}
		return ext
	}})
	return caps, ext
}

// DeclaredExtensions is the extensions object the instance declared to its
// upstream as a client ({} for none).
func (i *Instance) DeclaredExtensions() json.RawMessage {
	if i.declaredExt == nil {
		return json.RawMessage(`{}`)
	}
	return i.declaredExt
}

// Suits reports whether inst, started before it was known whom it would
// serve, may be leased to the host ctx was marked for by ForHost: for
// every extension the upstream itself declares, the instance declared the
// host's settings (or, like the host, none). An extension is in use only
// when both sides declare it, so those the upstream does not declare make
// no difference. Any instance suits a ctx not marked.
func Suits(ctx context.Context, inst *Instance) bool {
	ext, ok := hostExtensions(ctx)
	if !ok {
		return true
	}
	var server, host, declared map[string]json.RawMessage
	_ = json.Unmarshal(inst.Capabilities().Extensions, &server)
	_ = json.Unmarshal(ext, &host)
	_ = json.Unmarshal(inst.DeclaredExtensions(), &declared)
	for id := range server {
		h, hok := host[id]
		d, dok := declared[id]
		if hok != dok || (hok && !sameJSON(h, d)) {
			return false
		}
	}
	return true
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
