package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mcpServersJSON is a Claude Desktop style config with n stdio servers, each with an
// argument list and an env value, as a large team config would have.
func mcpServersJSON(n int) []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"mcpServers\": {\n")
	for i := range n {
		fmt.Fprintf(&b, "    \"server-%d\": {\"command\": \"npx\", \"args\": [\"-y\", \"@scope/pkg-%d\"], \"env\": {\"TOKEN\": \"v%d\"}}", i, i, i)
		if i < n-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  }\n}\n")
	return b.Bytes()
}

// benchmarkCommand runs one command of the binary on a config of n servers.
func benchmarkCommand(b *testing.B, n int, args func(file string) []string) {
	file := filepath.Join(b.TempDir(), "claude_desktop_config.json")
	if err := os.WriteFile(file, mcpServersJSON(n), 0o644); err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	for b.Loop() {
		stderr.Reset()
		if code := run(args(file), strings.NewReader(""), io.Discard, &stderr); code != 0 {
			b.Fatalf("exit %d: %s", code, stderr.String())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/server")
}

// BenchmarkImport1k and BenchmarkImport10k time `import` on an mcpServers JSON of 1,000
// and 10,000 servers: the time per server stays flat when import is linear.
func BenchmarkImport1k(b *testing.B)  { benchmarkCommand(b, 1_000, importArgs) }
func BenchmarkImport10k(b *testing.B) { benchmarkCommand(b, 10_000, importArgs) }

// BenchmarkCheck1k and BenchmarkCheck10k time `check` on the same files.
func BenchmarkCheck1k(b *testing.B)  { benchmarkCommand(b, 1_000, checkArgs) }
func BenchmarkCheck10k(b *testing.B) { benchmarkCommand(b, 10_000, checkArgs) }

func importArgs(file string) []string { return []string{"import", file} }
func checkArgs(file string) []string  { return []string{"check", "--config", file} }
