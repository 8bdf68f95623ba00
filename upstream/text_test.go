package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestValidTextReadsAsEncodingJSONDoes: what validText makes of a string
// that is not UTF-8 is what encoding/json decodes it to, and valid text is
// returned as it is, without a copy.
func TestValidTextReadsAsEncodingJSONDoes(t *testing.T) {
	for _, in := range []string{"caf\xe9", "\xff\xfe", "\xe2\x82", "a\xe2\x82\xacb", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "plain"} {
		raw := []byte(`"` + in + `"`)
		var want string
		assert.NoError(t, json.Unmarshal(raw, &want))
		assert.Equal(t, `"`+want+`"`, string(validText(raw)), "%q", in)
	}
	valid := []byte(`{"text":"café"}`)
	assert.Same(t, &valid[0], &validText(valid)[0])
}
