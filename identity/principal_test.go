package identity

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrincipalString(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Principal
		want string
	}{
		{"no one", Principal{}, ""},
		{"local", Local(), "local"},
		{"client", Client("ci-bot"), `client:"ci-bot"`},
		{"client with quotes", Client(`a "b" c`), `client:"a \"b\" c"`},
		{"no client name is local", Client(""), "local"},
		{"address", Address("192.0.2.7"), "address:192.0.2.7"},
		{"subject", Subject("https://id.example", "alice"), `subject:"https://id.example" "alice"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.String())
			text, err := tc.p.MarshalText()
			assert.NoError(t, err)
			assert.Equal(t, tc.want, string(text))
		})
	}
}

// TestPrincipalsDiffer: principals compare by kind and name, so that a
// client named "x" is not the address "x", and each is a map key of its own.
func TestPrincipalsDiffer(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Principal
		same bool
	}{
		{"a client and an address of one name", Client("x"), Address("x"), false},
		{"two clients", Client("x"), Client("y"), false},
		{"one client twice", Client("x"), Client("x"), true},
		{"local and no one", Local(), Principal{}, false},
		{"local twice", Local(), Client(""), true},
		{"an address and local", Address(""), Local(), false},
		{"a subject and a client of one name", Subject("https://id.example", "x"), Client("x"), false},
		{"two subjects of one issuer", Subject("https://id.example", "alice"), Subject("https://id.example", "bob"), false},
		{"one subject of two issuers", Subject("https://a.example", "alice"), Subject("https://b.example", "alice"), false},
		{"one subject twice", Subject("https://id.example", "alice"), Subject("https://id.example", "alice"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, tc.a == tc.b)
			m := map[Principal]int{tc.a: 1}
			m[tc.b]++
			if tc.same {
				assert.Len(t, m, 1)
			} else {
				assert.Len(t, m, 2)
			}
		})
	}
}

func TestPrincipalClient(t *testing.T) {
	assert.Equal(t, "x", Client("x").Client())
	assert.Empty(t, Address("x").Client())
	assert.Empty(t, Local().Client())
	assert.True(t, Principal{}.IsZero())
	assert.False(t, Local().IsZero())
	assert.Empty(t, Subject("https://id.example", "x").Client(), "a subject is no static token's client")
	assert.True(t, Subject("https://id.example", "x").Authenticated())
	assert.True(t, Client("x").Authenticated())
	assert.False(t, Address("x").Authenticated())
	assert.False(t, Local().Authenticated())
}
