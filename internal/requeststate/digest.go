package requeststate

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
)

// retryMembers are the params members a retry adds to the original request,
// and _meta, which a client may fill anew on every attempt (progress token,
// trace context): none of them is part of what the request asks for.
var retryMembers = map[string]bool{"inputResponses": true, "requestState": true, "_meta": true}

// RequestDigest is the identity of a request that a token is bound to: its
// method and its params less inputResponses, requestState and _meta, in a
// canonical form (members sorted, numbers as written), so that a retry that
// re-encodes the same params in another order still matches and one that
// changes any argument does not.
func RequestDigest(method string, params json.RawMessage) (Digest, error) {
	var members map[string]json.RawMessage
	if len(bytes.TrimSpace(params)) > 0 {
		if err := json.Unmarshal(params, &members); err != nil {
			return Digest{}, errors.New("params must be a JSON object")
		}
	}
	identity := make(map[string]any, len(members))
	for name, raw := range members {
		if retryMembers[name] {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return Digest{}, err
		}
		identity[name] = v
	}
	canonical, err := json.Marshal(identity) // maps marshal with sorted keys
	if err != nil {
		return Digest{}, err
	}
	h := sha256.New()
	h.Write([]byte("request\x00"))
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(canonical)
	var d Digest
	h.Sum(d[:0])
	return d, nil
}
