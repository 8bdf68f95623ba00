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

	srv.URL = "https://usr-7c1e9a%40corp:pw@api.example.com/mcp"
	got = Scrub(srv, `Post "https://usr-7c1e9a@corp:***@api.example.com/mcp": refused; Post "https://usr-7c1e9a%40corp:***@api.example.com/mcp"`)
	assert.NotContains(t, got, "usr-7c1e9a", "the user name is scrubbed, decoded as Go's HTTP client quotes it and as written")
	assert.Contains(t, got, "api.example.com/mcp")

	srv.URL = "https://:pw@api.example.com/mcp"
	assert.Equal(t, "no user at all", Scrub(srv, "no user at all"), "an empty user name is nothing to scrub")
	assert.Equal(t, "no user at all", scrubber(srv)("no user at all"))

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

// TestScrubValuesFromEnv: texts the config took from the environment are scrubbed
// wherever they were put, a URL path or an argument included, also in the escaped form
// a URL quotes them in; values under four characters are left alone.
func TestScrubValuesFromEnv(t *testing.T) {
	srv := &config.Server{
		URL:     "http://127.0.0.1:1/pathsecret777/v1/mcp",
		Args:    []string{"--token=argsecret4242"},
		FromEnv: []string{"pathsecret777", "argsecret4242", "v1", "abc"},
	}
	text := `Post "http://127.0.0.1:1/pathsecret777/v1/mcp": dial tcp 127.0.0.1:1: connect: connection refused; arg is argsecret4242; abc`
	got := Scrub(srv, text)
	assert.NotContains(t, got, "pathsecret777")
	assert.NotContains(t, got, "argsecret4242")
	assert.Contains(t, got, "http://127.0.0.1:1/"+redacted+"/v1/mcp", "the host still says where; short values stay")
	assert.Contains(t, got, "arg is "+redacted)
	assert.True(t, strings.HasSuffix(got, "; abc"), "values under four characters are left alone: %s", got)

	srv.FromEnv = []string{"sec ret/777"}
	got = Scrub(srv, `Post "http://h/sec%20ret%2F777/mcp" and q=sec+ret%2F777 and sec ret/777`)
	assert.NotContains(t, got, "sec%20ret%2F777")
	assert.NotContains(t, got, "sec+ret%2F777")
	assert.NotContains(t, got, "sec ret/777")

	var buf strings.Builder
	log := scrubbingLogger(slog.New(slog.NewTextHandler(&buf, nil)), &config.Server{ID: "a", FromEnv: []string{"argsecret4242"}})
	log.Info("upstream stderr", "line", "arg is argsecret4242")
	assert.NotContains(t, buf.String(), "argsecret4242", "an upstream echoing its argument is scrubbed")
}
