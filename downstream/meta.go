package downstream

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// metaVersion is the protocol version a request names in its _meta (the
// sessionless generation), or "". Every request asks, so the members are
// found by scanning, not decoded.
func metaVersion(params json.RawMessage) string {
	if !rawjson.Mentions(params, "_meta") {
		return ""
	}
	meta := rawjson.Member(params, "_meta")
	if meta == nil {
		return ""
	}
	v, _ := rawjson.String(rawjson.Member(meta, protocol.MetaProtocolVersion))
	return v
}

// requestMeta is what a request's params._meta tells the transport: the
// protocol version and client capabilities of the sessionless generation.
type requestMeta struct {
	version string          // "" when absent or not a string (metaVersion)
	caps    json.RawMessage // the client capabilities as they came; nil when absent
}

// readMeta reads params._meta once for all the transport asks of it. Every
// request asks, so the members are found by scanning, not decoded: a
// request that does not mention _meta costs one byte search.
func readMeta(params json.RawMessage) requestMeta {
	if !rawjson.Mentions(params, "_meta") {
		return requestMeta{}
	}
	meta := rawjson.Member(params, "_meta")
	if meta == nil {
		return requestMeta{}
	}
	var values [2][]byte
	if rawjson.Members(meta, []string{protocol.MetaProtocolVersion, protocol.MetaClientCapabilities}, values[:]) != nil {
		return requestMeta{}
	}
	return requestMeta{version: metaVersionString(values[0]), caps: values[1]}
}

// metaVersionString reads a _meta protocol version (raw, a JSON string):
// one the transports serve, written plainly as every client writes it, is
// the constant itself, with no string made for each request; any other as
// rawjson.String reads it ("" when not a string).
func metaVersionString(raw []byte) string {
	if len(raw) > 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		for _, v := range protocol.Versions {
			if string(raw[1:len(raw)-1]) == v {
				return v
			}
		}
	}
	v, _ := rawjson.String(raw)
	return v
}

// capabilities are the client capabilities the request declares in its
// _meta, kept raw (nil when absent or null).
func (m requestMeta) capabilities() json.RawMessage { return present(m.caps) }

// negotiated reads protocolVersion from an initialize result.
func negotiated(result json.RawMessage) string {
	var r struct {
		Version string `json:"protocolVersion"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	return r.Version
}

// cancelledID reads requestId from notifications/cancelled params.
func cancelledID(params json.RawMessage) json.RawMessage {
	var p struct {
		ID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.ID) == 0 {
		return nil
	}
	return p.ID
}

// clientCancel is why a request ends when its client cancelled it with
// notifications/cancelled: the reason the client gave, which goes on to the
// upstream's cancellation as it was given. It is errCancelled.
type clientCancel struct{ reason string }

func (c *clientCancel) Error() string {
	if c.reason == "" {
		return errCancelled.Error()
	}
	return c.reason
}

func (c *clientCancel) Is(target error) bool { return target == errCancelled }

// CancelReason is the reason the client gave, "" for none.
func (c *clientCancel) CancelReason() string { return c.reason }

// cancelCause is the cause of a cancellation with params.
func cancelCause(params json.RawMessage) error {
	var p struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(params, &p)
	return &clientCancel{reason: p.Reason}
}

// initCapabilities reads capabilities from initialize params (nil when
// absent or null), kept raw.
func initCapabilities(params json.RawMessage) json.RawMessage {
	return present(members(params)["capabilities"])
}

func present(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}
