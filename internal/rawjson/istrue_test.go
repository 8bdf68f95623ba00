package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsTrue(t *testing.T) {
	for _, tc := range []struct {
		obj  string
		want bool
	}{
		{`{"content":[],"isError":true}`, true},
		{`{"isError":false}`, false},
		{`{"content":[{"isError":true}]}`, false},
		{`{"text":"\"isError\":true"}`, false},
		{`{"isE\u0072ror" : true}`, true},
		{`{"isError":true,"isError":false}`, false},
		{`{"isError":"true"}`, false},
		{`{"isErrorX":true}`, false},
		{`{"isError":tr`, false},
		{``, false},
	} {
		assert.Equal(t, tc.want, IsTrue([]byte(tc.obj), "isError"), tc.obj)
	}
}

// FuzzIsTrue checks the fast top-level scan against the validating
// scanner on every valid JSON object.
func FuzzIsTrue(f *testing.F) {
	for _, seed := range []string{
		`{"content":[],"isError":true}`,
		`{"isError":false,"content":[{"type":"text","text":"\"isError\":true"}]}`,
		`{"content":[{"isError":true}]}`,
		`{"isE\u0072ror" : true}`,
		`{"isError":true,"isError":false}`,
		`{"a":"\\","isError":true}`,
		`{"a":{"b":["}",{"isError":true}]},"isError":  true }`,
		"{\n\t\"isError\"\r\n:\ttrue}",
		`{"isError":"true"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := IsTrue(data, "isError") // must not panic on anything
		if !json.Valid(data) || len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' {
			return
		}
		want := string(Member(data, "isError")) == "true"
		if got != want {
			t.Fatalf("IsTrue(%q, \"isError\") = %v, want %v", data, got, want)
		}
	})
}
