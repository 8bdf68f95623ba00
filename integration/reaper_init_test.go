package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reaper process (the binary started as `_reaper`, see
// supervise.ReaperCommand) runs from the supervise package's
// initialisation, before the packages it never uses: the JSON Schema
// meta-schemas mcp-go's server compiles, Prometheus's registry, the
// aggregator's own config, proxy and transports. GODEBUG=inittrace=1 lists
// every package initialised, with the heap it allocated; the reaper, its
// stdin at EOF, exits at once after its own.
func TestReaperSkipsTheBinarysInitialisation(t *testing.T) {
	cmd := exec.Command(binary, "_reaper")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = bytes.NewReader(nil), &stderr
	require.NoError(t, cmd.Run(), "the reaper exits cleanly at EOF: %s", stderr.String())

	inits, total := map[string]bool{}, 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // init PKG @T ms, C ms clock, N bytes, A allocs
		if len(f) < 8 || f[0] != "init" {
			continue
		}
		inits[f[1]] = true
		for i := 3; i < len(f); i++ {
			if f[i] == "bytes," {
				if n, err := strconv.Atoi(f[i-1]); err == nil {
					total += n
				}
			}
		}
	}
	require.NotEmpty(t, inits, "inittrace printed nothing: %s", stderr.String())
	t.Logf("the reaper initialised %d packages, %d bytes of heap", len(inits), total)
	for _, heavy := range []string{
		"github.com/santhosh-tekuri/jsonschema/v6",
		"github.com/prometheus/client_golang/prometheus",
		"github.com/mcp-aggregator/mcp-aggregator/config",
		"github.com/mcp-aggregator/mcp-aggregator/proxy",
		"github.com/mcp-aggregator/mcp-aggregator/downstream",
	} {
		assert.False(t, inits[heavy], "the reaper initialised %s", heavy)
	}
	assert.True(t, inits["golang.org/x/sys/unix"] || inits["os"], "the trace lists the reaper's own imports")
}
