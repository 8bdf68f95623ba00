package gateway

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestListenAddr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"8080", "127.0.0.1:8080"},
		{":8080", "127.0.0.1:8080"},
		{"0.0.0.0:8080", "0.0.0.0:8080"},
		{"localhost:8080", "localhost:8080"},
		{"[::1]:8080", "[::1]:8080"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ListenAddr(tt.in), tt.in)
	}
}

func TestLoopbackBind(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"8080", true},
		{":8080", true},
		{"127.0.0.1:8080", true},
		{"localhost:8080", true},
		{"[::1]:8080", true},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"10.0.0.5:8080", false},
		{"example.com:8080", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, LoopbackBind(tt.addr), tt.addr)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"", "8080", ":0", "127.0.0.1:8080", "[::1]:0", "localhost:http", "0.0.0.0:443"} {
		assert.NoError(t, CheckAddr(ok), ok)
	}
	tests := []struct{ addr, want string }{
		{"nonsense:::", `--http "nonsense:::" is not an address to listen on`},
		{"abc", `--http "abc": "abc" is not a port`},
		{":99999", `--http ":99999": "99999" is not a port`},
	}
	for _, tt := range tests {
		err := CheckAddr(tt.addr)
		if assert.Error(t, err, tt.addr) {
			assert.Contains(t, err.Error(), tt.want, tt.addr)
			assert.Contains(t, err.Error(), "such as 127.0.0.1:8080", "the error shows a valid address")
		}
	}
}

func TestReplicaLabel(t *testing.T) {
	tests := []struct{ prefix, want string }{
		{"r1-", "r1"},
		{"eu.west_2.", "eu.west_2"},
		{"a-b", "a-b"},
		{"", "host-7"},
		{"-._", "host-7"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ReplicaLabel(tt.prefix, "host-7"), tt.prefix)
	}
}
