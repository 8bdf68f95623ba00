package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTLSFlags(t *testing.T) {
	assert.NoError(t, tlsFlags("", "", ""))
	assert.NoError(t, tlsFlags("c", "k", "127.0.0.1:8443"))
	assert.ErrorContains(t, tlsFlags("c", "", "127.0.0.1:8443"), "go together")
	assert.ErrorContains(t, tlsFlags("", "k", "127.0.0.1:8443"), "go together")
	assert.ErrorContains(t, tlsFlags("c", "k", ""), "need --http")
}
