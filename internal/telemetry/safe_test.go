package telemetry

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSafeURIKeepsSecretsOut(t *testing.T) {
	for in, want := range map[string]string{
		"file:///srv/notes.md":                                 "file:///srv/notes.md",
		"https://user:pw@example.com/a":                        "https://example.com/a",
		"https://bucket.example.com/o?X-Amz-Signature=abc&x=1": "https://bucket.example.com/o",
		"https://example.com/doc#token=abc":                    "https://example.com/doc",
		"repo://x/y?":                                          "repo://x/y",
		"%zz":                                                  "",
	} {
		assert.Equal(t, want, safeURI(in), in)
	}
}
