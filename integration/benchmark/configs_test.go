package benchmark

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// upstreamServer is one entry under servers: in a generated config.
type upstreamServer struct {
	id        string
	stateless bool
	command   string   // stdio, when set
	args      []string // stdio
	env       []string // stdio, NAME=value
	url       string   // streamable_http, when set
	whitelist []string
	prefix    string
	prewarm   int // stateful servers only
}

// demoTools is the demo "tools" server of the aggregator binary, shared by every session.
func demoTools(id string) upstreamServer {
	return upstreamServer{id: id, stateless: true, command: binary, args: []string{"demo-server", "tools"}}
}

// httpEcho is an HTTP upstream at url, shared by every session.
func httpEcho(id, url string) upstreamServer {
	return upstreamServer{id: id, stateless: true, url: url}
}

// echoUpstream is this test binary as the raw-JSON echo upstream over stdio, shared by
// every session.
func echoUpstream(tb testing.TB, id string) upstreamServer {
	exe, args, env := helper(tb, "echo", "stdio")
	return upstreamServer{id: id, stateless: true, command: exe, args: args, env: env}
}

// manyTools is this test binary serving n tools, exported under prefix.
func manyTools(tb testing.TB, id string, n int, prefix string) upstreamServer {
	exe, args, env := helper(tb, "tools", strconv.Itoa(n))
	return upstreamServer{id: id, stateless: true, command: exe, args: args, env: env, prefix: prefix}
}

// renderConfig writes a version 1 config serving the given servers in order.
func renderConfig(servers ...upstreamServer) string {
	var b strings.Builder
	b.WriteString("version: 1\nservers:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "  %s:\n", s.id)
		fmt.Fprintf(&b, "    truely-stateless: %t\n", s.stateless)
		if s.url != "" {
			fmt.Fprintf(&b, "    transport: streamable_http\n    url: %s\n", yamlString(s.url))
		} else {
			fmt.Fprintf(&b, "    command: %s\n", yamlString(s.command))
			if len(s.args) > 0 {
				fmt.Fprintf(&b, "    args: [%s]\n", yamlList(s.args))
			}
			if len(s.env) > 0 {
				b.WriteString("    env:\n")
				for _, kv := range s.env {
					name, value, _ := strings.Cut(kv, "=")
					fmt.Fprintf(&b, "      %s: %s\n", name, yamlString(value))
				}
			}
		}
		if len(s.whitelist) > 0 {
			fmt.Fprintf(&b, "    tools:\n      whitelist: [%s]\n", yamlList(s.whitelist))
		}
		if s.prefix != "" {
			fmt.Fprintf(&b, "    transform:\n      - prefix: %s\n", yamlString(s.prefix))
		}
		if !s.stateless {
			fmt.Fprintf(&b, "    lease: { prewarm: %d }\n", s.prewarm)
		}
	}
	return b.String()
}

func yamlList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = yamlString(s)
	}
	return strings.Join(quoted, ", ")
}

// catalogConfig is the tools/list benchmark's config: servers upstreams of tools tools
// each, every one under its own prefix.
func catalogConfig(tb testing.TB, servers, tools int) string {
	list := make([]upstreamServer, servers)
	for i := range list {
		id := fmt.Sprintf("s%02d", i)
		list[i] = manyTools(tb, id, tools, id+"_")
	}
	return renderConfig(list...)
}

// reloadConfig is the reload benchmark's config; the two variants differ in the
// whitelist alone, so switching between them is a filter-only change.
func reloadConfig(variant int) string {
	s := demoTools("demo")
	s.whitelist = []string{"echo"}
	if variant%2 == 1 {
		s.whitelist = append(s.whitelist, "add")
	}
	return renderConfig(s)
}

// leaseConfig is the lease benchmark's config: the demo server, one instance per session.
func leaseConfig(prewarm int) string {
	s := demoTools("demo")
	s.stateless = false
	s.prewarm = prewarm
	return renderConfig(s)
}

// TestConfigs checks that every config the benchmarks generate loads without a problem,
// so that a benchmark never measures an aggregator that rejected its servers.
func TestConfigs(t *testing.T) {
	binary := "/usr/local/bin/mcp-aggregator" // any absolute path: nothing is started
	demo := upstreamServer{id: "demo", stateless: true, command: binary, args: []string{"demo-server", "tools"}}
	stateful := demo
	stateful.stateless, stateful.prewarm = false, 1
	filtered := demo
	filtered.whitelist = []string{"echo", "add"}
	cases := map[string]struct {
		config string
		ids    []string
	}{
		"stdio":    {renderConfig(demo), []string{"demo"}},
		"http":     {renderConfig(httpEcho("remote", "http://127.0.0.1:8123/mcp")), []string{"remote"}},
		"stateful": {renderConfig(stateful), []string{"demo"}},
		"filtered": {renderConfig(filtered), []string{"demo"}},
		"catalog":  {catalogConfig(t, 3, 100), []string{"s00", "s01", "s02"}},
		"echo":     {renderConfig(echoUpstream(t, "echo")), []string{"echo"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws, problems := config.LoadBytes("/tmp/mcp-aggregator.yaml", []byte(tc.config), os.LookupEnv)
			require.NotNil(t, ws, "config:\n%s", tc.config)
			assert.Empty(t, problems, "config:\n%s", tc.config)
			var ids []string
			for _, s := range ws.Servers {
				ids = append(ids, s.ID)
			}
			assert.Equal(t, tc.ids, ids)
		})
	}
	t.Run("reload variants differ only in the whitelist", func(t *testing.T) {
		a, pa := config.LoadBytes("/tmp/a.yaml", []byte(reloadConfig(0)), os.LookupEnv)
		b, pb := config.LoadBytes("/tmp/a.yaml", []byte(reloadConfig(1)), os.LookupEnv)
		require.NotNil(t, a)
		require.NotNil(t, b)
		require.Empty(t, pa)
		require.Empty(t, pb)
		sa, sb := a.Server("demo"), b.Server("demo")
		assert.NotEqual(t, sa.Hash, sb.Hash, "a filter change must change the server's hash")
		assert.Equal(t, sa.Command, sb.Command)
		assert.True(t, slices.Equal(sa.Args, sb.Args))
	})
	t.Run("lease variants", func(t *testing.T) {
		for _, prewarm := range []int{0, 1} {
			ws, problems := config.LoadBytes("/tmp/l.yaml", []byte(leaseConfig(prewarm)), os.LookupEnv)
			require.NotNil(t, ws)
			require.Empty(t, problems)
			s := ws.Server("demo")
			assert.False(t, s.Stateless)
			assert.Equal(t, prewarm, s.Lease.Prewarm)
		}
	})
}
