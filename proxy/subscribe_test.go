package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWithSubscriptionID: an update's _meta names the subscription it is
// delivered on, or none; every other member is kept as it was.
func TestWithSubscriptionID(t *testing.T) {
	const sid = "io.modelcontextprotocol/subscriptionId"
	for _, c := range []struct {
		name, params, id, want string
	}{
		{"session: the upstream's id goes", `{"uri":"a://b","_meta":{"` + sid + `":7}}`, "", `{"uri":"a://b"}`},
		{"session: other _meta stays", `{"uri":"a://b","_meta":{"` + sid + `":7,"x/y":[1,12345678901234567890]}}`, "", `{"uri":"a://b","_meta":{"x/y":[1,12345678901234567890]}}`},
		{"session: no _meta", `{"uri":"a://b"}`, "", `{"uri":"a://b"}`},
		{"session: empty _meta stays", `{"uri":"a://b","_meta":{}}`, "", `{"uri":"a://b","_meta":{}}`},
		{"listen: replaced", `{"uri":"a://b","_meta":{"` + sid + `":7}}`, `"L1"`, `{"uri":"a://b","_meta":{"` + sid + `":"L1"}}`},
		{"listen: added to other _meta", `{"_meta":{"k":true},"uri":"a://b"}`, `5`, `{"_meta":{"k":true,"` + sid + `":5},"uri":"a://b"}`},
		{"listen: added", `{"uri":"a://b"}`, `5`, `{"_meta":{"` + sid + `":5},"uri":"a://b"}`},
		{"listen: empty _meta", `{"uri":"a://b","_meta":{}}`, `5`, `{"uri":"a://b","_meta":{"` + sid + `":5}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var id json.RawMessage
			if c.id != "" {
				id = json.RawMessage(c.id)
			}
			got := withSubscriptionID(json.RawMessage(c.params), id)
			assert.JSONEq(t, c.want, string(got))
			assert.True(t, json.Valid(got), "%s", got)
		})
	}
}
