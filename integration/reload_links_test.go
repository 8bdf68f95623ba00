package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadConfigMapSwaps: the config is mounted as Kubernetes mounts a
// ConfigMap (mcp.yaml links to ..data/mcp.yaml, ..data to a directory of
// the data) and updated as the kubelet updates it: a new directory, a new
// ..data link renamed over the old one, the old directory removed. Each
// swap reloads and tells the client, however many there are, also when the
// new file has the size and mtime of the old one, while an HTTP client
// keeps its session.
func TestReloadConfigMapSwaps(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
		n := 0
		publish := func(config string) {
			n++
			data := fmt.Sprintf("..2026_11_23_%02d", n)
			require.NoError(t, os.Mkdir(filepath.Join(dir, data), 0o755))
			file := filepath.Join(dir, data, "mcp.yaml")
			require.NoError(t, os.WriteFile(file, []byte(config), 0o644))
			require.NoError(t, os.Chtimes(file, mtime, mtime))
			old, _ := os.Readlink(filepath.Join(dir, "..data"))
			require.NoError(t, os.Symlink(data, filepath.Join(dir, "..data_tmp")))
			require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
			if old != "" {
				require.NoError(t, os.RemoveAll(filepath.Join(dir, old)))
			}
		}
		// Two configs of one size: the whitelists differ in one name of three letters.
		configs := []string{reloadConfig("echo, pid"), reloadConfig("echo, add")}
		require.Len(t, configs[1], len(configs[0]))
		publish(configs[0])
		path := filepath.Join(dir, "mcp-aggregator.yaml")
		require.NoError(t, os.Symlink(filepath.Join("..data", "mcp.yaml"), path))

		a := startAggregator(t, tr, aggregatorOptions{configs: []string{path}})
		a.waitLoaded()
		c := a.connect()
		if tr == httpTransport {
			listen(t, a, c)
		}
		r := &reloadRig{t: t, a: a, c: c, path: path}
		pid := r.pid("pid")
		for i := 1; i <= 4; i++ {
			publish(configs[i%2])
			assert.Contains(t, r.waitReload(), "changed=true")
			r.expectNotified(i)
			want := []string{"mcp_release", "mcp_status", "echo", "pid"}
			if i%2 == 1 {
				want = []string{"mcp_release", "mcp_status", "echo", "add"}
			}
			assert.ElementsMatch(t, want, r.names(), "after swap %d", i)
		}
		assert.Equal(t, pid, r.pid("pid"), "a filter edit must not restart the server")
		assert.Equal(t, 4, r.listChanged(), "one tools/list_changed per swap")
	})
}
