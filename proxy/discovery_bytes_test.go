package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// benchmarkCatalog is the retrieval benchmark's catalog (public MCP servers'
// real tools, see discovery/testdata/README.md) as committed entries.
func benchmarkCatalog(t *testing.T) (*catalog.Catalog, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "discovery", "testdata", "catalog.json"))
	require.NoError(t, err)
	var file struct {
		Tools []struct {
			Name       string          `json:"name"`
			Server     string          `json:"server"`
			Original   string          `json:"original"`
			Definition json.RawMessage `json:"definition"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	byServer := map[string][]*catalog.Entry{}
	var order []string
	for _, tool := range file.Tools {
		if byServer[tool.Server] == nil {
			order = append(order, tool.Server)
		}
		byServer[tool.Server] = append(byServer[tool.Server], &catalog.Entry{Exported: tool.Name, Server: tool.Server, Original: tool.Original, Raw: tool.Definition})
	}
	cat := catalog.Empty()
	for _, s := range order {
		cat = cat.WithServer(s, byServer[s])
	}
	return cat, order
}

// TestDiscoveryListingBytes measures what tools/list costs a client's
// context in both modes over the benchmark catalog.
func TestDiscoveryListingBytes(t *testing.T) {
	cat, order := benchmarkCatalog(t)
	p := newTestProxy(t)
	p.MarkLoaded()
	size := func(d config.Discovery) (int, int) {
		p.reloadMu.Lock()
		settings := p.current().with()
		settings.discovery = d
		p.commit(settings, cat, order, p.current().servers)
		p.reloadMu.Unlock()
		resp := handle(t, p, "2025-11-25", "tools/list", "")
		return len(resp.Result), len(toolNames(t, resp.Result))
	}
	allBytes, allTools := size(config.Discovery{Mode: config.DiscoveryAll})
	searchBytes, searchTools := size(config.Discovery{Mode: config.DiscoverySearch})
	ratio := float64(searchBytes) / float64(allBytes)
	t.Logf("tools/list over %d tools: mode all %d bytes (%d tools), mode search %d bytes (%d tools), %.1f%%",
		cat.Len(), allBytes, allTools, searchBytes, searchTools, 100*ratio)
	assert.Equal(t, 4, searchTools, "the admin tools and the pair")
	assert.Less(t, ratio, 0.05, "search mode lists under 5% of the bytes")
}
