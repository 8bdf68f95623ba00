package upstream

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// trimLeftSpace trims what bytes.TrimLeft with JSON's whitespace does.
func TestTrimLeftSpace(t *testing.T) {
	for _, s := range []string{"", " ", " \t\r\n{}", "{} ", "\v{}", "\u00a0{}", "x"} {
		assert.Equal(t, string(bytes.TrimLeft([]byte(s), " \t\r\n")), string(trimLeftSpace([]byte(s))), "%q", s)
	}
}
