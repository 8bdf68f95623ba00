// Package rawjson encodes JSON without rewriting what it carries: unlike
// encoding/json's Marshal it leaves '<', '>' and '&' as they are, so raw
// upstream payloads embedded in a message keep every byte.
package rawjson

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v like json.Marshal, but without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
