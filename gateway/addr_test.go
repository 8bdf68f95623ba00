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
