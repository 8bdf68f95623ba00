package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInterpolate(t *testing.T) {
	env := envOf(map[string]string{"HOST": "example.com", "EMPTY": "", "DOLLAR": "${HOST}"})
	tests := []struct {
		in      string
		want    string
		fromEnv bool
		taken   []string // what came from the environment
		missing []string
		err     string
	}{
		{in: "plain", want: "plain"},
		{in: "https://${HOST}/api", want: "https://example.com/api", fromEnv: true, taken: []string{"example.com"}},
		{in: "${HOST}:${UNSET:-8080}/${HOST}", want: "example.com:8080/example.com", fromEnv: true, taken: []string{"example.com", "example.com"}},
		{in: "$${HOST}", want: "${HOST}"},
		{in: "cost: $$5 and $5", want: "cost: $5 and $5"},
		{in: "trailing $", want: "trailing $"},
		{in: "$HOST", want: "$HOST"},
		{in: "${DOLLAR}", want: "${HOST}", fromEnv: true, taken: []string{"${HOST}"}}, // substituted text is not expanded again
		{in: "${EMPTY}", want: "", fromEnv: true},
		{in: "${EMPTY:-dflt}", want: "dflt"},
		{in: "${UNSET:-a:-b}", want: "a:-b"},
		{in: "${UNSET:-}", want: ""},
		{in: "${HOST:-other}", want: "example.com", fromEnv: true, taken: []string{"example.com"}},
		{in: "${A}${B}", missing: []string{"A", "B"}},
		{in: "${", err: "no closing }"},
		{in: "x ${HOST", err: "no closing }"},
		{in: "${}", err: "does not name a variable"},
		{in: "${1X}", err: "does not name a variable"},
		{in: "${A B}", err: "does not name a variable"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			x, err := interpolate(tt.in, env)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.missing, x.missing)
			if tt.missing == nil {
				assert.Equal(t, tt.want, x.value)
				assert.Equal(t, tt.fromEnv, x.fromEnv)
				assert.Equal(t, tt.taken, x.taken, "defaults and empty values are not taken from the environment")
			}
		})
	}
}

func TestParseDotenv(t *testing.T) {
	data := "\uFEFF# comment\n\n" +
		"PLAIN=value\r\n" +
		"export EXPORTED=yes\n" +
		"SPACED = padded value  \n" +
		"COMMENTED=abc # note\n" +
		"HASH=a#b\n" +
		"SINGLE='keep $HOME \\n # literally'\n" +
		"DOUBLE=\"line\\nnext \\\"q\\\" \\\\ \\x\" # note\n" +
		"EMPTY=\n" +
		"EQUALS=a=b=c\n" +
		"no equals sign\n" +
		"1BAD=x\n" +
		"OPEN=\"unterminated\n" +
		"TRAIL='x' junk\n"
	vars, bad := parseDotenv([]byte(data))
	assert.Equal(t, map[string]string{
		"PLAIN":     "value",
		"EXPORTED":  "yes",
		"SPACED":    "padded value",
		"COMMENTED": "abc",
		"HASH":      "a#b",
		"SINGLE":    `keep $HOME \n # literally`,
		"DOUBLE":    "line\nnext \"q\" \\ \\x",
		"EMPTY":     "",
		"EQUALS":    "a=b=c",
	}, vars)
	assert.Equal(t, []int{12, 13, 14, 15}, bad)
}

// FuzzInterpolate checks that expansion never panics, leaves text without "$" alone,
// and that escaping every "$" as "$$" always gives the original text back.
func FuzzInterpolate(f *testing.F) {
	f.Add("https://${HOST}/api")
	f.Add("$${LITERAL} costs $$5")
	f.Add("${UNSET:-default}")
	f.Add("${")
	f.Add("$")
	lookup := envOf(map[string]string{"HOST": "example.com", "EMPTY": ""})
	f.Fuzz(func(t *testing.T, s string) {
		x, err := interpolate(s, lookup)
		if !strings.Contains(s, "$") && (err != nil || x.value != s || x.fromEnv) {
			t.Fatalf("interpolate(%q) changed text without $: %q, %v", s, x.value, err)
		}
		if err == nil && len(x.missing) == 0 && !strings.Contains(s, "${") && x.value != strings.ReplaceAll(s, "$$", "$") {
			t.Fatalf("interpolate(%q) = %q without references", s, x.value)
		}
		escaped := strings.ReplaceAll(s, "$", "$$")
		back, err := interpolate(escaped, lookup)
		if err != nil || back.value != s || back.fromEnv || len(back.missing) > 0 {
			t.Fatalf("escaped %q came back as %q (err %v)", s, back.value, err)
		}
	})
}
