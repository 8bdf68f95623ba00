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

// AppendString appends s as a JSON string. Plain ASCII, the common case for
// tool names and methods, is copied as is; anything else goes through
// Marshal.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// A copy goes into Marshal's interface, so that s does not
			// escape for the callers of the common case.
			quoted, _ := Marshal(string([]byte(s)))
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
