package benchmark

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"testing"
)

// lineClient is the leanest possible stdio MCP client: it writes a request line and reads
// lines until the response with the same id, which it returns undecoded. mcp-go's client
// transport decodes every response, which for a 1.5 MB tools/list costs far more than
// the aggregator spends producing it; this client shows the aggregator's own latency.
type lineClient struct {
	stdin  io.WriteCloser
	stdout *bufio.Reader
	lastID int
}

// startLineClient starts "mcp-aggregator serve --config configPath" over stdio, completes
// the handshake, and stops the aggregator (EOF on its stdin) when the benchmark ends.
func startLineClient(tb testing.TB, configPath string) (*lineClient, *stderrLog) {
	tb.Helper()
	log := newStderrLog()
	cmd := exec.Command(binary, "serve", "--config", configPath)
	cmd.Dir = tb.TempDir()
	cmd.Stderr = log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	c := &lineClient{stdin: stdin, stdout: bufio.NewReaderSize(stdout, 4<<20)}
	init := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcp-aggregator-benchmark","version":"1.0.0"}}`, protocolVersion)
	if _, err := c.roundTrip("initialize", init); err != nil {
		tb.Fatalf("%v; aggregator stderr:\n%s", err, log)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		tb.Fatal(err)
	}
	return c, log
}

// roundTrip sends one request and returns the response line. Notifications that arrive
// first are skipped.
func (c *lineClient) roundTrip(method, params string) ([]byte, error) {
	c.lastID++
	id := strconv.Itoa(c.lastID)
	req := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + "}\n"
	if _, err := io.WriteString(c.stdin, req); err != nil {
		return nil, err
	}
	prefix := []byte(`{"jsonrpc":"2.0","id":` + id + `,`)
	for {
		line, err := c.stdout.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if bytes.HasPrefix(line, prefix) {
			if bytes.HasPrefix(line[len(prefix):], []byte(`"error"`)) {
				return nil, fmt.Errorf("%s: %s", method, line)
			}
			return line, nil
		}
	}
}

// countTools returns the number of tools in a tools/list response line.
func countTools(line []byte) (int, error) {
	var resp struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return 0, err
	}
	return len(resp.Result.Tools), nil
}
