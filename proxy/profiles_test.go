package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

func profiledEntry(server, exported string) *catalog.Entry {
	return &catalog.Entry{Exported: exported, Server: server, Original: exported, Raw: json.RawMessage(`{"name":"` + exported + `"}`)}
}

// profileState is a state with a GitHub server, a filesystem server, the
// admin tools and the given profiles.
func profileState(profiles map[string]config.Profile, search bool) *state {
	st := initialState()
	st.catalog = withAdmin(catalog.Empty().
		WithServer("github", []*catalog.Entry{profiledEntry("github", "github_issue"), profiledEntry("github", "github_pr")}).
		WithServer("fs", []*catalog.Entry{profiledEntry("fs", "fs_read")}),
		adminEntries(st.admin))
	st.catalog.WithOrder([]string{adminServer, "github", "fs"})
	st.catalog.Render()
	if search {
		st.discovery = config.Discovery{Mode: config.DiscoverySearch, Always: []string{"fs_*"}}
		st.search = catalog.NewSearchView(st.discovery, st.catalog, adminServer, isDiscoveryTool)
	}
	st.profiles = compileProfiles(profiles)
	return st
}

func names(t *testing.T, list json.RawMessage) []string {
	t.Helper()
	var tools []struct {
		Name string `json:"name"`
	}
	require.NoError(t, json.Unmarshal(list, &tools), "%s", list)
	out := []string{}
	for _, tl := range tools {
		out = append(out, tl.Name)
	}
	return out
}

func TestProfileViews(t *testing.T) {
	profiles := map[string]config.Profile{
		"ci-bot": {Servers: []string{"github"}, Tools: []string{"github_i*"}},
		"reader": {Servers: []string{"fs", "github"}},
		"picker": {Tools: []string{"*_read", "github_pr"}},
	}
	tests := []struct {
		client string
		search bool
		want   []string
	}{
		{"", false, []string{"mcp_release", "mcp_status", "github_issue", "github_pr", "fs_read"}},
		{"nobody-with-a-profile", false, []string{"mcp_release", "mcp_status", "github_issue", "github_pr", "fs_read"}},
		{"ci-bot", false, []string{"mcp_release", "mcp_status", "github_issue"}},
		{"reader", false, []string{"mcp_release", "mcp_status", "github_issue", "github_pr", "fs_read"}},
		{"picker", false, []string{"mcp_release", "mcp_status", "github_pr", "fs_read"}},
		{"ci-bot", true, []string{"mcp_release", "mcp_status"}},
		{"picker", true, []string{"mcp_release", "mcp_status", "fs_read"}},
	}
	for _, tc := range tests {
		st := profileState(profiles, tc.search)
		got := names(t, st.view(listTools, tc.client))
		assert.ElementsMatch(t, tc.want, got, "client %q (search %v)", tc.client, tc.search)
		for _, n := range []string{"github_issue", "github_pr", "fs_read"} {
			assert.Equal(t, tc.search || inList(got, n), tc.search || st.visibleTool(tc.client, n),
				"client %q: tools/list and calls agree on %s", tc.client, n)
		}
	}
}

func inList(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestProfileViewCacheFollowsState(t *testing.T) {
	p := &Proxy{}
	a := profileState(map[string]config.Profile{"c": {Tools: []string{"fs_*"}}}, false)
	b := profileState(map[string]config.Profile{"c": {Tools: []string{"github_*"}}}, false)
	assert.Contains(t, names(t, p.listed(a, listTools, "c")), "fs_read")
	assert.NotContains(t, names(t, p.listed(b, listTools, "c")), "fs_read", "a new state is not served from the old one's cache")
	assert.Contains(t, names(t, p.listed(b, listTools, "c")), "github_pr")
}

func TestProfilesChanged(t *testing.T) {
	base := map[string]config.Profile{"c": {Servers: []string{"a"}, Tools: []string{"x_*"}}}
	assert.False(t, profilesChanged(compileProfiles(base), compileProfiles(map[string]config.Profile{"c": {Servers: []string{"a"}, Tools: []string{"x_*"}}})))
	assert.True(t, profilesChanged(compileProfiles(base), compileProfiles(map[string]config.Profile{"c": {Servers: []string{"b"}, Tools: []string{"x_*"}}})))
	assert.True(t, profilesChanged(compileProfiles(base), nil))
	assert.True(t, profilesChanged(compileProfiles(base), compileProfiles(map[string]config.Profile{"d": base["c"]})))
}

// clientSession is a session of an authenticated client.
type clientSession struct {
	fakeSession
	client string
}

func (s clientSession) Principal() identity.Principal { return identity.Client(s.client) }

func TestLeaseKeyPerClient(t *testing.T) {
	meta := map[string]json.RawMessage{LeaseMetaKey: json.RawMessage(`"conv-1"`)}
	keyOf := func(client string, s downstream.Session, meta map[string]json.RawMessage) session.Key {
		k, _ := LeaseKeyOf(&downstream.Request{Principal: identity.Client(client), Session: s}, meta)
		return k
	}
	a, b := keyOf("a", nil, meta), keyOf("b", nil, meta)
	assert.NotEqual(t, a, b, "two clients naming the same lease do not share it")
	assert.NotEqual(t, keyOf("a", nil, nil), keyOf("b", nil, nil), "nor the anonymous lease")
	assert.Equal(t, "meta:conv-1", keyOf("", nil, meta).String(), "without a client the key is as before")
	assert.Equal(t, `client:"a" meta:conv-1`, a.String())
	assert.Equal(t, session.NamedKey(identity.Client("a"), "conv-1"), a)

	s := clientSession{fakeSession: "sess-1", client: `we"ird client`}
	k, _ := LeaseKey(s, nil)
	assert.Equal(t, sessionLeaseKey(s), k, "a session's calls and its end use one key")
	assert.Equal(t, k, keyOf(s.client, s, nil))
	back, ok := k.SessionID()
	require.True(t, ok)
	assert.Equal(t, "sess-1", back, "the session is found again from its lease key")
}

// TestProfileKeyByWho: a profile naming a subject wins, then the profile
// named after the client, then the first in the file whose claim the
// principal has; a static token's client, or a subject that matches
// nothing, keeps the profile of its client name.
func TestProfileKeyByWho(t *testing.T) {
	st := profileState(map[string]config.Profile{
		"web-app": {Servers: []string{"fs"}},
		"admins":  {Servers: []string{"github"}, Match: config.ProfileMatch{Claim: "groups", Value: "admins"}, Line: 3},
		"ops":     {Match: config.ProfileMatch{Claim: "role", Value: "ops"}, Line: 4},
		"alice":   {Servers: []string{"fs", "github"}, Match: config.ProfileMatch{Subject: "alice"}, Line: 9},
	}, false)
	st.matchers = profileMatchers(st.profiles)
	user := func(sub, client string, claims map[string]any) identity.Caller {
		return identity.Caller{Principal: identity.Subject("https://id.example", sub), Client: client, Claims: claims}
	}
	both := map[string]any{"groups": []any{"staff", "admins"}, "role": "ops"}
	for _, tc := range []struct {
		name string
		who  identity.Caller
		want string
	}{
		{"the subject wins", user("alice", "web-app", both), matchKey("alice")},
		{"then the client", user("bob", "web-app", both), "web-app"},
		{"then the first claim in the file", user("bob", "cli", both), matchKey("admins")},
		{"a claim as a string", user("bob", "cli", map[string]any{"role": "ops"}), matchKey("ops")},
		{"a claim not held", user("bob", "cli", map[string]any{"groups": []any{"staff"}}), "cli"},
		{"a static token's client", identity.ClientCaller("alice"), "alice"},
		{"the local user", identity.LocalCaller(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, st.profileKey(tc.who))
		})
	}
	assert.Nil(t, st.profileOf("admins"), "a profile with a match is no client's, not even one of its name")
}
