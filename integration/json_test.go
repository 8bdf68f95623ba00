package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeJSON decodes one JSON value keeping every number as written (json.Number), so
// that comparing two decoded values compares big integers and long fractions exactly.
func decodeJSON(t testing.TB, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "invalid JSON: %.300s", raw)
	_, err := dec.Token()
	require.ErrorIs(t, err, io.EOF, "trailing data after the JSON value: %.300s", raw)
	return v
}

// decodeObject is decodeJSON for a value that must be an object.
func decodeObject(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	obj, ok := decodeJSON(t, raw).(map[string]any)
	require.True(t, ok, "not a JSON object: %.300s", raw)
	return obj
}

// assertJSONEqual asserts that two JSON texts hold the same value, numbers compared
// digit for digit.
func assertJSONEqual(t testing.TB, want, got []byte, msgAndArgs ...any) bool {
	t.Helper()
	return assert.Equal(t, decodeJSON(t, want), decodeJSON(t, got), msgAndArgs...)
}

// decodeAsJavaScript decodes JSON the way JavaScript's JSON.parse does: every number
// becomes a float64. Values that went through a JavaScript client can only be compared
// in this form.
func decodeAsJavaScript(t testing.TB, raw []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v), "invalid JSON: %.300s", raw)
	return v
}

// mustJSON encodes v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
