package discovery

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// read runs readDefinition and collects what it hands to each field.
func read(raw string) (doc, map[field][]string) {
	var d doc
	got := map[field][]string{}
	readDefinition([]byte(raw), &d, fieldFunc(func(f field, text []byte) { got[f] = append(got[f], string(text)) }))
	return d, got
}

func TestReadDefinition(t *testing.T) {
	d, got := read(`{"name":"t","title":"The \"title\"","description":"Line one\nline two","annotations":{"readOnlyHint":true,"title":"Ann"},` +
		`"inputSchema":{"type":"object","description":"not a property","properties":{"path":{"type":"string","description":"Where"},` +
		`"opts":{"type":"object","title":"Options","properties":{"deep":{"type":"object","properties":{"deeper":{"description":"too deep"}}}}},` +
		`"list":{"type":"array","items":{"type":"object","properties":{"item":{"description":"In items"}}}}},"required":["path"]},` +
		`"outputSchema":{"properties":{"ignored":{}}},"_meta":{"description":"ignored"}}`)
	assert.Equal(t, []string{`The \"title\"`, "Ann"}, got[fieldTitle], "strings as written")
	assert.Equal(t, []string{`Line one\nline two`}, got[fieldDescription])
	assert.Equal(t, []string{"path", "opts", "deep", "list", "item"}, got[fieldParamName], "two levels, array items included")
	assert.Equal(t, []string{"Where", "Options", "In items"}, got[fieldParamText])
	assert.True(t, json.Valid(d.hit.InputSchema))
	assert.True(t, bytes.HasPrefix(d.hit.InputSchema, []byte(`{"type":"object","description":"not a property"`)))
	assert.True(t, bytes.HasSuffix(d.hit.InputSchema, []byte(`"required":["path"]}`)))
}

func TestReadDefinitionOddShapes(t *testing.T) {
	for _, raw := range []string{``, `[]`, `"x"`, `{`, `{"description":`, `{"description":"open`, `{"inputSchema":[1,{"a":"}"}]}`,
		`{"title":12,"description":null,"inputSchema":"x","annotations":[]}`, `{"inputSchema":{"properties":[{"x":1}]}}`, `{} trailing`} {
		assert.NotPanics(t, func() { read(raw) }, "%q", raw)
	}
	d, got := read(`{"title":12,"description":"kept","inputSchema":"x"}`)
	assert.Equal(t, []string{"kept"}, got[fieldDescription])
	assert.Empty(t, d.hit.InputSchema)
}

// FuzzReadDefinition: on any input the reader ends without panicking, and
// on valid JSON the input schema it keeps is the one encoding/json finds.
func FuzzReadDefinition(f *testing.F) {
	for _, seed := range []string{`{"name":"a","description":"x\ty","inputSchema":{"type":"object","properties":{"p":{"description":"q"}}}}`,
		`{"inputSchema":{"properties":{"a":{"items":{"properties":{"b":{}}}}}}}`, `{"a":[1,2,{"b":"\""}],"inputSchema":{}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var d doc
		readDefinition(raw, &d, fieldFunc(func(field, []byte) {}))
		var def struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &def) != nil || len(def.InputSchema) == 0 || def.InputSchema[0] != '{' {
			return
		}
		// encoding/json also matches keys written with escapes or in
		// another case; the catalog's come as upstreams write them.
		if bytes.Count(raw, []byte(`"inputSchema"`)) == 1 && bytes.Count(bytes.ToLower(raw), []byte(`inputschema`)) == 1 && !bytes.Contains(raw, []byte(`\u`)) {
			assert.Equal(t, string(def.InputSchema), string(d.hit.InputSchema))
		}
	})
}
