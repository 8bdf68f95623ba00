package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cacheRead is what a read of the surface server's demo://cache/ URIs
// says: which of its reads answered (the text "read N by PID") and the
// hints the client was given.
type cacheRead struct {
	Text       string
	TTLMs      int64
	CacheScope string
}

// readCached reads uri as c and returns what the result says.
func readCached(t *testing.T, c *client, uri string) cacheRead {
	t.Helper()
	resp := c.mustRequest("resources/read", map[string]any{"uri": uri})
	require.Empty(t, string(resp.Error), "resources/read %s", uri)
	var r struct {
		Contents []struct {
			URI  string `json:"uri"`
			Text string `json:"text"`
		} `json:"contents"`
		TTLMs      *int64 `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &r), "%s", resp.Result)
	require.Len(t, r.Contents, 1, "%s", resp.Result)
	require.Equal(t, uri, r.Contents[0].URI)
	require.NotNil(t, r.TTLMs, "the upstream's ttlMs reaches the client: %s", resp.Result)
	return cacheRead{Text: r.Contents[0].Text, TTLMs: *r.TTLMs, CacheScope: r.CacheScope}
}

// cacheConfig has the surface demo server (shared by every session when
// shared is true, else leased to each) and, with tokens, two clients with
// static tokens.
func cacheConfig(shared, tokens bool) string {
	var b strings.Builder
	b.WriteString("version: 1\n")
	if tokens {
		b.WriteString("http:\n  auth:\n    tokens:\n      alice: { env: ALICE_TOKEN }\n      bob: { env: BOB_TOKEN }\n")
	}
	fmt.Fprintf(&b, "servers:\n  surface:\n    truely-stateless: %t\n    lease_reminder: false\n    %s\n", shared, demoServer("surface"))
	return b.String()
}

// TestCachePublicSharedPrivateNot: a result the upstream marks public is
// served from the cache to every principal while its ttlMs lasts (the
// upstream answers one read for many), with the ttlMs that is left; one
// marked private is served again to the principal that read it and never
// to another; a short ttlMs is read again once it ran out, and a
// notifications/resources/updated of the URI ends its entry at once. The
// metrics count the hits and misses.
func TestCachePublicSharedPrivateNot(t *testing.T) {
	t.Parallel()
	aliceTok, bobTok := randomToken(t), randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, cacheConfig(true, true))},
		env: []string{"ALICE_TOKEN=" + aliceTok, "BOB_TOKEN=" + bobTok}})
	a.waitLoaded()
	alice, bob := a.connectAs(aliceTok), a.connectAs(bobTok)

	const public = "demo://cache/public/600000/doc"
	first := readCached(t, alice, public)
	assert.Equal(t, cacheRead{Text: first.Text, TTLMs: 600000, CacheScope: "public"}, first, "a miss is the upstream's answer as it was sent")
	require.True(t, strings.HasPrefix(first.Text, "read 1 by "), first.Text)
	for _, c := range []*client{alice, bob, alice} {
		again := readCached(t, c, public)
		assert.Equal(t, first.Text, again.Text, "a public result is served from the cache, to every principal")
		assert.Equal(t, "public", again.CacheScope)
		assert.LessOrEqual(t, again.TTLMs, int64(600000), "the ttlMs left, not the whole")
		assert.Positive(t, again.TTLMs)
	}

	const private = "demo://cache/private/600000/mine"
	mine := readCached(t, alice, private)
	assert.True(t, strings.HasPrefix(mine.Text, "read 2 by "), mine.Text)
	assert.Equal(t, mine.Text, readCached(t, alice, private).Text, "alice is served her private result again")
	bobs := readCached(t, bob, private)
	assert.True(t, strings.HasPrefix(bobs.Text, "read 3 by "), "bob is never served alice's private result: %s", bobs.Text)
	assert.Equal(t, bobs.Text, readCached(t, bob, private).Text, "bob is served his own")
	assert.Equal(t, mine.Text, readCached(t, alice, private).Text, "and alice still hers")

	// So far one miss each for the public result, alice's private and
	// bob's private one; every other read a hit.
	fams := opsScrapeAs(t, a, aliceTok)
	assert.Equal(t, 6.0, opsValue(t, fams, "mcp_aggregator_result_cache_lookups_total", map[string]string{"outcome": "hit"}))
	assert.Equal(t, 3.0, opsValue(t, fams, "mcp_aggregator_result_cache_lookups_total", map[string]string{"outcome": "miss"}))
	assert.Equal(t, 3.0, opsValue(t, fams, "mcp_aggregator_result_cache_entries", map[string]string{}),
		"one public entry, and alice's and bob's private ones: %v", fams["mcp_aggregator_result_cache_entries"])

	// A short ttlMs: read again from the upstream once it ran out.
	const short = "demo://cache/public/200/short"
	before := readCached(t, alice, short)
	require.Eventually(t, func() bool { return readCached(t, bob, short).Text != before.Text }, callTimeout, 20*time.Millisecond,
		"a result is read again from the upstream after its ttlMs")

	// An update of the URI ends its entry: the surface server sends
	// notifications/resources/updated right after a subscribe's answer.
	openSessionStream(t, a, alice)
	const watched = "demo://cache/public/600000/watched"
	cached := readCached(t, alice, watched)
	require.Equal(t, cached.Text, readCached(t, bob, watched).Text)
	require.Empty(t, string(alice.mustRequest("resources/subscribe", map[string]any{"uri": watched}).Error))
	_, ok := alice.waitNotification(func(n notification) bool {
		return n.Method == "notifications/resources/updated" && strings.Contains(string(n.Params), watched)
	}, callTimeout)
	require.True(t, ok, "alice is told the resource changed")
	assert.NotEqual(t, cached.Text, readCached(t, bob, watched).Text, "an updated resource is read again from the upstream")
}

// TestCacheLeasedNeverShared: what a leased instance answers, public or
// not, serves its own session again and never another session, which has
// an instance of its own and reads from it.
func TestCacheLeasedNeverShared(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, cacheConfig(false, false))
	a.waitLoaded()
	one, two := a.connect(), a.connect()

	const uri = "demo://cache/public/600000/doc"
	first := readCached(t, one, uri)
	require.True(t, strings.HasPrefix(first.Text, "read 1 by "), first.Text)
	assert.Equal(t, first.Text, readCached(t, one, uri).Text, "the session is served its lease's result from the cache")

	other := readCached(t, two, uri)
	assert.True(t, strings.HasPrefix(other.Text, "read 1 by "), other.Text)
	assert.NotEqual(t, first.Text, other.Text, "another session reads its own instance, not the first session's result")
	assert.Equal(t, other.Text, readCached(t, two, uri).Text)
	assert.Equal(t, first.Text, readCached(t, one, uri).Text)

	fams := opsScrape(t, a)
	assert.Equal(t, 3.0, opsValue(t, fams, "mcp_aggregator_result_cache_lookups_total", map[string]string{"outcome": "hit"}))
	assert.Equal(t, 2.0, opsValue(t, fams, "mcp_aggregator_result_cache_lookups_total", map[string]string{"outcome": "miss"}))
}

// TestCacheEndsWithTheInstance: a reload that changes the server starts a
// new instance, and nothing the old one answered is served from the
// cache; cache.max_bytes: 0, reloaded, turns the cache off.
func TestCacheEndsWithTheInstance(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, cacheConfig(true, false))
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()
	c := a.connect()
	r := &reloadRig{t: t, a: a, c: c, path: path}

	const uri = "demo://cache/public/600000/doc"
	before := readCached(t, c, uri)
	require.Equal(t, before.Text, readCached(t, c, uri).Text, "served from the cache")

	changed := strings.Replace(cacheConfig(true, false), "lease_reminder: false", "lease_reminder: false\n    env: {CHANGED: \"1\"}", 1)
	require.NotEqual(t, cacheConfig(true, false), changed)
	r.save(changed)
	r.waitReload()
	after := readCached(t, c, uri)
	assert.True(t, strings.HasPrefix(after.Text, "read 1 by "), "the new instance answered: %s", after.Text)
	assert.NotEqual(t, before.Text, after.Text, "the old instance's result is not served after the reload")
	require.Equal(t, after.Text, readCached(t, c, uri).Text, "the new instance's result is kept")

	r.save("cache: {max_bytes: 0}\n" + changed)
	r.waitReload()
	off := []string{readCached(t, c, uri).Text, readCached(t, c, uri).Text}
	assert.Equal(t, []string{strings.Replace(after.Text, "read 1", "read 2", 1), strings.Replace(after.Text, "read 1", "read 3", 1)}, off,
		"with the cache off every read reaches the upstream")
}

// TestCacheSDKv2Upstream: the TypeScript SDK v2 server, pinned to
// 2026-07-28 over stdio, sets the hints through its own cacheHint. Its
// public resource is read once for two principals, its private one once
// for each, and the one without a hint (the SDK sends ttlMs 0) every time.
func TestCacheSDKv2Upstream(t *testing.T) {
	t.Parallel()
	nodeEntry(t, "@modelcontextprotocol/server/package.json")
	aliceTok, bobTok := randomToken(t), randomToken(t)
	config := fmt.Sprintf(`version: 1
http:
  auth:
    tokens:
      alice: { env: ALICE_TOKEN }
      bob: { env: BOB_TOKEN }
servers:
  sdk:
    truely-stateless: true
    command: node
    args: [%q]
    protocol: "2026-07-28"
`, filepath.Join(nodeDir, "cacheserver.mjs"))
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, config)},
		env: []string{"ALICE_TOKEN=" + aliceTok, "BOB_TOKEN=" + bobTok}})
	a.waitLoaded()
	alice, bob := a.connectAs(aliceTok), a.connectAs(bobTok)

	var got []string
	for _, step := range []struct {
		c   *client
		uri string
	}{
		{alice, "cache://public"}, {bob, "cache://public"},
		{alice, "cache://private"}, {bob, "cache://private"}, {alice, "cache://private"}, {bob, "cache://private"},
		{alice, "cache://none"}, {alice, "cache://none"},
	} {
		r := readCached(t, step.c, step.uri)
		got = append(got, r.Text)
	}
	assert.Equal(t, []string{"read 1", "read 1", "read 2", "read 3", "read 2", "read 3", "read 4", "read 5"}, got, "log:\n%s", a.log)

	// A 2026-07-28 client is served the same entries, as its principal:
	// the upstream's hints with the ttlMs left, the aggregator's name.
	for _, tc := range []struct{ token, uri, text, scope string }{
		{aliceTok, "cache://public", "read 1", "public"},
		{bobTok, "cache://private", "read 3", "private"},
	} {
		result := modernRead(t, a.url, tc.token, tc.uri)
		var r struct {
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
			ResultType string `json:"resultType"`
			TTLMs      int64  `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
			Meta       struct {
				ServerInfo struct {
					Name string `json:"name"`
				} `json:"io.modelcontextprotocol/serverInfo"`
			} `json:"_meta"`
		}
		require.NoError(t, json.Unmarshal(result, &r), "%s", result)
		require.Len(t, r.Contents, 1, "%s", result)
		assert.Equal(t, tc.text, r.Contents[0].Text, "%s", result)
		assert.Equal(t, "complete", r.ResultType)
		assert.Equal(t, tc.scope, r.CacheScope)
		assert.Positive(t, r.TTLMs)
		assert.LessOrEqual(t, r.TTLMs, int64(600000))
		assert.Equal(t, "mcp-aggregator", r.Meta.ServerInfo.Name, "the aggregator names itself, cached or not")
	}
}

// modernRead reads uri sessionlessly (2026-07-28) as the client holding
// token and returns the raw result.
func modernRead(t *testing.T, url, token, uri string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := modernPostAs(ctx, url, token, "resources/read", uri, map[string]any{"uri": uri})
	require.NoError(t, err)
	raw, data := readReply(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &msg), "%s", data)
	require.Empty(t, msg.Error, "%s", data)
	return msg.Result
}
