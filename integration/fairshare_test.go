package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fromAddress is an HTTP client whose connections come from the loopback
// address ip: to a gateway without http.auth, another client than one on
// 127.0.0.1.
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// shareReply is a JSON-RPC answer read whole, as JSON or from an SSE stream.
type shareReply struct {
	status int
	Result json.RawMessage `json:"result"`
	Error  struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func readShareReply(t *testing.T, resp *http.Response, err error) shareReply {
	t.Helper()
	require.NoError(t, err)
	raw, data := readReply(t, resp)
	r := shareReply{status: resp.StatusCode}
	require.NoError(t, json.Unmarshal(data, &r), "%s", raw)
	return r
}

// TestFairShareSessionsPerAddress: on a gateway other hosts reach, without
// http.auth, the client is its address. One address at
// --max-sessions-per-client is refused with 429 and an error naming the
// address, the cap and its flag, while another address still opens
// sessions.
func TestFairShareSessionsPerAddress(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))},
		flags:   []string{"--http", "0.0.0.0:0", "--allow-unauthenticated", "--max-sessions-per-client", "2"},
	})
	a.url = loopbackURL(a.url)
	a.waitLoaded()
	open := func(ip string) shareReply {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
			`","capabilities":{},"clientInfo":{"name":"share-test","version":"1"}}}`)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := fromAddress(ip).Do(req)
		return readShareReply(t, resp, err)
	}
	for i := range 2 {
		r := open("127.0.0.1")
		require.Equal(t, http.StatusOK, r.status, "session %d: %s", i, r.Error.Message)
	}
	r := open("127.0.0.1")
	assert.Equal(t, http.StatusTooManyRequests, r.status)
	for _, hint := range []string{"address 127.0.0.1 holds its maximum of 2 open sessions", "--max-sessions-per-client", "DELETE"} {
		assert.Contains(t, r.Error.Message, hint)
	}
	r = open("127.0.0.2")
	assert.Equal(t, http.StatusOK, r.status, "another address is still served: %s", r.Error.Message)
}

// TestFairShareLeasesPerAddress: on a gateway other hosts reach, without
// http.auth, a sessionless client naming a new lease
// in _meta on every call holds at most --max-leases-per-client instances
// of a stateful server; the next lease is refused with an error naming
// the cap, while another address still leases one of the instances left,
// and a release makes room for the first again.
func TestFairShareLeasesPerAddress(t *testing.T) {
	t.Parallel()
	open := []string{"--http", "0.0.0.0:0", "--allow-unauthenticated"}
	for name, flags := range map[string][]string{
		"flag":    append(slices.Clone(open), "--max-leases-per-client", "2"),
		"default": open, // half of lease.max_instances 4
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fairShareLeases(t, flags)
		})
	}
}

func fairShareLeases(t *testing.T, flags []string) {
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  counter:\n    %s\n    transform: [{prefix: c_}]\n    lease: {max_instances: 4}\n", demoServer("counter")))},
		flags:   flags,
	})
	a.url = loopbackURL(a.url)
	a.waitLoaded()
	call := func(ip, tool, lease string, args map[string]any) shareReply {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		params := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{"mcp-aggregator/lease": lease}}
		resp, err := modernPostVia(ctx, fromAddress(ip), a.url, "", "tools/call", tool, params)
		return readShareReply(t, resp, err)
	}
	increment := func(ip, lease string) shareReply { return call(ip, "c_increment", lease, map[string]any{}) }
	for _, lease := range []string{"conv-a", "conv-b"} {
		r := increment("127.0.0.1", lease)
		require.Zero(t, r.Error.Code, "lease %s: %s", lease, r.Error.Message)
	}
	r := increment("127.0.0.1", "conv-c")
	require.NotZero(t, r.Error.Code, "a third lease of one address is refused: %s", r.Result)
	for _, hint := range []string{`address 127.0.0.1 holds its maximum of 2 leased instances of server "counter"`, "--max-leases-per-client", "mcp_release"} {
		assert.Contains(t, r.Error.Message, hint)
	}

	r = increment("127.0.0.2", "conv-c")
	assert.Zero(t, r.Error.Code, "another address still leases an instance: %s", r.Error.Message)

	r = call("127.0.0.1", "mcp_release", "conv-a", map[string]any{"serverId": "counter"})
	require.Zero(t, r.Error.Code, "%s", r.Error.Message)
	r = increment("127.0.0.1", "conv-c")
	assert.Zero(t, r.Error.Code, "a released lease gives its place back: %s", r.Error.Message)
}

// TestFairShareTasksPerClient: the sessions of one http.auth client hold
// at most --max-tasks-per-client tasks together; a task-augmented call
// over it is refused, naming the client and the cap, while another
// client still starts tasks.
func TestFairShareTasksPerClient(t *testing.T) {
	t.Parallel()
	alice, bob := randomToken(t), randomToken(t)
	cfg := strings.Replace(tasksConfig(t), "version: 1\n",
		"version: 1\nhttp: {auth: {tokens: {alice: {env: ALICE_TOKEN}, bob: {env: BOB_TOKEN}}}}\n", 1)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, cfg)},
		flags:   []string{"--max-tasks-per-client", "2"},
		env:     []string{"ALICE_TOKEN=" + alice, "BOB_TOKEN=" + bob},
	})
	a.waitLoaded()
	job := map[string]any{"label": "job", "steps": 1, "stepMs": 10}
	first, second := a.connectAs(alice), a.connectAs(alice)
	startTask(t, first, "a_countdown", job)
	startTask(t, second, "b_countdown", job)

	resp := second.mustRequest("tools/call", map[string]any{"name": "a_countdown", "arguments": job, "task": map[string]any{"ttl": 60000}})
	e := mustTaskError(t, resp, "a third task of one client")
	for _, hint := range []string{`client "alice" holds its maximum of 2 tasks`, "--max-tasks-per-client"} {
		assert.Contains(t, e.Message, hint)
	}

	startTask(t, a.connectAs(bob), "a_countdown", job) // another client still starts tasks
}

// TestFairShareSparesLoopbackWithoutAuth: a loopback gateway without
// http.auth serves this machine alone, so no address counts as a client:
// one address holds more sessions than --max-sessions-per-client.
func TestFairShareSparesLoopbackWithoutAuth(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))},
		flags:   []string{"--max-sessions-per-client", "1"},
	})
	a.waitLoaded()
	a.connect()
	a.connect()
}

// TestFairShareFlagsAreChecked: a negative share is a command line that
// cannot be used, and the flags are in serve's help.
func TestFairShareFlagsAreChecked(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--max-tasks-per-client", "--max-leases-per-client", "--max-calls-per-client"} {
		res := runCLI(t, "serve", "--http", "127.0.0.1:0", flag, "-2")
		assert.Equal(t, 2, res.code, "%s", res.stderr)
		assert.Contains(t, res.stderr, flag)
		res = runCLI(t, "serve", "--help")
		assert.Contains(t, res.stdout+res.stderr, flag[1:])
	}
}
