package integration

import (
	"debug/buildinfo"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shippedKinds are the kinds of library the shipped binary holds one of
// each: a module whose path matches the pattern is of that kind, and only
// the one named may be linked. A second needs its reasons in the commit
// and in docs/architecture.md ("Dependencies"), and its name here.
var shippedKinds = []struct {
	kind    string
	pattern *regexp.Regexp
	allowed string
}{
	{"MCP SDK", regexp.MustCompile(`(?i)mcp|modelcontextprotocol`), "github.com/mark3labs/mcp-go"},
	{"JOSE/JWT library", regexp.MustCompile(`(?i)jose|jwt|jwx|jws|jwk|/paseto`), "github.com/golang-jwt/jwt/v5"},
}

// knownSecond are modules that are a second library of a kind for sure,
// named so that the test says what it found even if the pattern missed.
var knownSecond = map[string]string{
	"github.com/modelcontextprotocol/go-sdk": "MCP SDK",
	"github.com/go-jose/go-jose/v4":          "JOSE/JWT library",
	"github.com/go-jose/go-jose/v3":          "JOSE/JWT library",
	"github.com/zitadel/oidc/v3":             "OpenID Connect library (test authorization server)",
}

// TestBinaryLinksOneMCPSDKAndOneJOSELibrary: the built binary's module
// list (what `go version -m` prints) holds one MCP SDK and one JOSE/JWT
// library; those the tests use (the official Go SDK's client, zitadel/oidc
// as an authorization server, go-jose through it) stay out of it.
func TestBinaryLinksOneMCPSDKAndOneJOSELibrary(t *testing.T) {
	info, err := buildinfo.ReadFile(binary)
	require.NoError(t, err)
	require.NotEmpty(t, info.Deps, "the binary carries its module list")
	linked := map[string]bool{}
	for _, d := range info.Deps {
		path := d.Path
		if d.Replace != nil {
			path = d.Replace.Path
		}
		linked[path] = true
		if kind, ok := knownSecond[path]; ok {
			t.Errorf("the binary links %s, a second %s", path, kind)
			continue
		}
		for _, k := range shippedKinds {
			if k.pattern.MatchString(path) && path != k.allowed {
				t.Errorf("the binary links %s, which looks like a second %s besides %s: use %s, or give the reason in docs/architecture.md and name it in this test", path, k.kind, k.allowed, k.allowed)
			}
		}
	}
	for _, k := range shippedKinds {
		assert.True(t, linked[k.allowed], "%s is no longer linked: update this test and docs/architecture.md", k.allowed)
	}
}
