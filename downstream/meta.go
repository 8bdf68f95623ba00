package downstream

import (
	"encoding/json"
)

// metaVersion is the protocol version a request names in its _meta (the
// sessionless generation), or "".
func metaVersion(params json.RawMessage) string {
	if len(params) == 0 {
		return ""
	}
	var p struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	return p.Meta.Version
}

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
