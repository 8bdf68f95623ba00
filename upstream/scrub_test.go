package upstream

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

func TestScrub(t *testing.T) {
	srv := &config.Server{
		URL:     "https://bob:hunter22@api.example.com/mcp?key=sk-secret-123&x=1",
		Env:     map[string]string{"TOKEN": "ghp_abcdef", "SHORT": "on"},
		Headers: map[string]string{"Authorization": "Bearer tok-xyz-789"},
	}
	text := `Post "https://bob:hunter22@api.example.com/mcp?key=sk-secret-123&x=1": dial tcp: refused; env ghp_abcdef; header Bearer tok-xyz-789; flag on`
	got := Scrub(srv, text)
	for _, secret := range []string{"hunter22", "sk-secret-123", "ghp_abcdef", "tok-xyz-789"} {
		assert.NotContains(t, got, secret)
	}
	assert.Contains(t, got, "api.example.com/mcp", "the host and path still say where")
	assert.Contains(t, got, "flag on", "short values are left alone")

	plain := errors.New("nothing secret here")
	assert.Same(t, plain, ScrubError(srv, plain), "an error without secrets is returned as is")
	assert.Nil(t, ScrubError(srv, nil))
}

func TestScrubbingLogger(t *testing.T) {
	srv := &config.Server{ID: "s", Env: map[string]string{"TOKEN": "ghp_abcdef"}}
	var buf strings.Builder
	log := scrubbingLogger(slog.New(slog.NewTextHandler(&buf, nil)), srv).With("ctx", "pre ghp_abcdef")
	log.Info("upstream stderr ghp_abcdef", "line", "token=ghp_abcdef", slog.Group("g", "v", "ghp_abcdef"))
	assert.NotContains(t, buf.String(), "ghp_abcdef")
	assert.Contains(t, buf.String(), redacted)
}
