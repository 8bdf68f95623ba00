package oauth

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseChallenges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		want   []challenge
	}{
		{"bearer with quoted params", []string{`Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="files:read files:write"`},
			[]challenge{{"bearer", map[string]string{"resource_metadata": "https://mcp.example/.well-known/oauth-protected-resource/mcp", "scope": "files:read files:write"}}}},
		{"several challenges in one value", []string{`Basic realm="a, b", BEARER Error=invalid_token, resource_metadata="https://x.example/m"`},
			[]challenge{{"basic", map[string]string{"realm": "a, b"}}, {"bearer", map[string]string{"error": "invalid_token", "resource_metadata": "https://x.example/m"}}}},
		{"several values, escapes", []string{`Negotiate abc+/de==`, `Bearer realm="say \"hi\""`},
			[]challenge{{"negotiate", map[string]string{}}, {"bearer", map[string]string{"realm": `say "hi"`}}}},
		{"a scheme alone", []string{`Bearer`}, []challenge{{"bearer", map[string]string{}}}},
		{"unterminated quote keeps what came before", []string{`Bearer scope="a", resource_metadata="https://x`},
			[]challenge{{"bearer", map[string]string{"scope": "a"}}}},
		{"the first of a repeated param", []string{`Bearer scope=a, scope=b`}, []challenge{{"bearer", map[string]string{"scope": "a"}}}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, parseChallenges(tc.header))
		})
	}
	huge := []string{"Bearer scope=" + strings.Repeat("a", maxChallengeHeader+1)}
	assert.Empty(t, parseChallenges(huge), "a header over the bound is not parsed")
}
