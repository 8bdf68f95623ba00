package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// End-to-end tests of replicas behind a stock load balancer: two real
// aggregators and Debian's HAProxy on loopback, configured by the very file
// deploy/haproxy/haproxy.cfg, with a leased stateful upstream (the demo
// counter) and a slow tool.

// replicaSessions is how many sessions run at once through the balancer.
const replicaSessions = 16

// replicaConfig: a leased counter (one instance per session) and the shared
// demo tools, whose slow tool holds a call in flight. After a replica dies,
// the other holds every session and sessionless lease: room for them all.
func replicaConfig() string {
	return leaseConfig(leaseBlock("c", "counter", false, "lease: {max_instances: 48}"), leaseBlock("d", "tools", true))
}

// balancer is a running HAProxy in front of the replicas.
type balancer struct {
	url    string // its /mcp
	log    *logBuffer
	exited chan struct{}
}

// requireHAProxy returns the haproxy executable, or skips the test.
func requireHAProxy(t *testing.T) string {
	t.Helper()
	requireSlow(t)
	path, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed: apt-get install haproxy (.ci/run does) to run the replicas test")
	}
	return path
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// hostPort is the host:port of an aggregator's /mcp URL.
func hostPort(t testing.TB, url string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(url, "http://")
	require.True(t, ok, url)
	return strings.TrimSuffix(rest, "/mcp")
}

// startBalancer runs deploy/haproxy/haproxy.cfg with the replicas' addresses.
func startBalancer(t *testing.T, exe string, replicas ...string) *balancer {
	t.Helper()
	cfg, err := filepath.Abs(filepath.Join("..", "deploy", "haproxy", "haproxy.cfg"))
	require.NoError(t, err)
	return startBalancerWith(t, exe, cfg, replicas...)
}

// startBalancerWith runs HAProxy with the config file cfg.
func startBalancerWith(t *testing.T, exe, cfg string, replicas ...string) *balancer {
	t.Helper()
	front := freeAddr(t)
	b := &balancer{url: "http://" + front + "/mcp", log: newLogBuffer(), exited: make(chan struct{})}
	cmd := exec.Command(exe, "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), "MCP_FRONTEND="+front, "MCP_REPLICA_1="+replicas[0], "MCP_REPLICA_2="+replicas[1])
	cmd.Stdout, cmd.Stderr = b.log, b.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-b.exited
		}
		if t.Failed() {
			t.Logf("haproxy's log:\n%s", b.log)
		}
	})
	// Ready once the frontend answers: a request for anything but /mcp is
	// refused by the balancer itself.
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get("http://" + front + "/ready-probe")
		if err == nil {
			resp.Body.Close()
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "the balancer serves only /mcp")
			return b
		}
		select {
		case <-b.exited:
			t.Fatalf("haproxy exited at start:\n%s", b.log)
		case <-time.After(20 * time.Millisecond): // a port that opens has no event to wait on
		}
		require.True(t, time.Now().Before(deadline), "haproxy did not listen within %s:\n%s", startTimeout, b.log)
	}
}

// waitLog waits until n lines of log contain every one of parts.
func waitLog(t *testing.T, log *logBuffer, n int, parts ...string) {
	t.Helper()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		log.mu.Lock()
		text, changed := log.buf.String(), log.changed
		log.mu.Unlock()
		count := 0
		for _, line := range strings.Split(text, "\n") {
			if containsAll(line, parts...) {
				count++
			}
		}
		if count >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %d lines with %q within %s:\n%s", n, parts, startTimeout, text)
		}
	}
}

// mcpReply is what one POST got: the HTTP status and, with 200, the
// JSON-RPC response.
type mcpReply struct {
	status  int
	header  http.Header
	result  json.RawMessage
	rpcErr  json.RawMessage
	body    []byte // a refusal's body
	session string // Mcp-Session-Id of an initialize
}

// mcpPost posts one message and reads its response; onEvent sees every SSE
// event's data before the response.
func mcpPost(ctx context.Context, url string, header map[string]string, msg any, onEvent func([]byte)) (mcpReply, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return mcpReply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return mcpReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return mcpReply{}, err
	}
	defer resp.Body.Close()
	r := mcpReply{status: resp.StatusCode, header: resp.Header, session: resp.Header.Get("Mcp-Session-Id")}
	if resp.StatusCode != http.StatusOK {
		r.body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return r, nil
	}
	var final []byte
	take := func(data []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &m) == nil && len(m.ID) > 0 && (m.Result != nil || m.Error != nil) {
			final, r.result, r.rpcErr = data, m.Result, m.Error
			return false
		}
		if onEvent != nil {
			onEvent(data)
		}
		return true
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType == "text/event-stream" {
		err = readSSE(resp.Body, take)
	} else {
		var raw []byte
		if raw, err = io.ReadAll(resp.Body); err == nil {
			take(raw)
		}
	}
	if final == nil {
		return r, fmt.Errorf("no JSON-RPC response in a %s answer: %v", mediaType, err)
	}
	return r, nil
}

// rsession is one session-based client going through the balancer.
type rsession struct {
	url   string
	token string // bearer token; "" sends none
	id    string
	seq   atomic.Int64
}

func (s *rsession) header() map[string]string {
	h := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	if s.id != "" {
		h["Mcp-Session-Id"] = s.id
	}
	if s.token != "" {
		h["Authorization"] = "Bearer " + s.token
	}
	return h
}

// open initializes a new session.
func (s *rsession) open(ctx context.Context) error {
	s.id = ""
	r, err := mcpPost(ctx, s.url, s.header(), map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "replicas-test", "version": "1"}}}, nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK || r.session == "" || r.rpcErr != nil {
		return fmt.Errorf("initialize: HTTP %d %s %s", r.status, r.body, r.rpcErr)
	}
	s.id = r.session
	r, err = mcpPost(ctx, s.url, s.header(), map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}, nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: HTTP %d %s", r.status, r.body)
	}
	return nil
}

// call calls a tool; a failure of any kind is an error, a 404 is errGone.
func (s *rsession) call(ctx context.Context, tool string, args map[string]any, onEvent func([]byte)) (leaseReply, error) {
	if args == nil {
		args = map[string]any{}
	}
	params := map[string]any{"name": tool, "arguments": args}
	if onEvent != nil {
		params["_meta"] = map[string]any{"progressToken": "p" + s.id}
	}
	r, err := mcpPost(ctx, s.url, s.header(), map[string]any{"jsonrpc": "2.0", "id": s.seq.Add(1), "method": "tools/call", "params": params}, onEvent)
	switch {
	case r.status == http.StatusNotFound:
		return leaseReply{}, errGone
	case r.status != 0 && r.status != http.StatusOK:
		return leaseReply{}, fmt.Errorf("%s: HTTP %d: %s", tool, r.status, r.body)
	case err != nil:
		return leaseReply{}, err
	case r.rpcErr != nil:
		return leaseReply{}, fmt.Errorf("%s: JSON-RPC error %s", tool, r.rpcErr)
	}
	rep, err := leaseDecode(r.result)
	if err == nil && rep.IsError {
		err = fmt.Errorf("%s: tool error %q", tool, rep.Texts)
	}
	return rep, err
}

// close ends the session with DELETE.
func (s *rsession) close() {
	req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
	for k, v := range s.header() {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

var errGone = errors.New("404: the session is unknown here")

// slowCall starts d_slow on s and returns once it runs upstream (its first
// progress notification); its outcome arrives on the channel.
func slowCall(ctx context.Context, t *testing.T, s *rsession, seconds int) <-chan error {
	t.Helper()
	running, done := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := s.call(ctx, "d_slow", map[string]any{"seconds": seconds, "steps": 2 * seconds},
			func([]byte) { once.Do(func() { close(running) }) })
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the slow call ended before it reported progress: %v", err)
	case <-ctx.Done():
		t.Fatal("the slow call never reported progress")
	}
	return done
}

// holder says which replica holds a session, asking each directly.
func holder(t *testing.T, replicas []*aggregator, id string) int {
	t.Helper()
	found := -1
	for i, a := range replicas {
		select {
		case <-a.exited:
			continue
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		r, err := mcpPost(ctx, a.url, map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-11-25"},
			map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, nil)
		cancel()
		require.NoError(t, err)
		if r.status == http.StatusOK {
			require.Equal(t, -1, found, "two replicas hold session %s", id)
			found = i
		} else {
			require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
		}
	}
	return found
}

// counterRun calls c_increment n times and checks the values go on from
// the last one, on one process: every call reached the same instance.
func counterRun(ctx context.Context, s *rsession, from, n int, pid *int) error {
	for i := 1; i <= n; i++ {
		r, err := s.call(ctx, "c_increment", nil, nil)
		if err != nil {
			return err
		}
		if r.Value == nil || *r.Value != from+i {
			return fmt.Errorf("session %s: c_increment gave %s, want %d: another instance answered", s.id[:8], r.Raw, from+i)
		}
	}
	r, err := s.call(ctx, "c_pid", nil, nil)
	if err != nil {
		return err
	}
	if r.PID == nil {
		return fmt.Errorf("c_pid gave no pid: %s", r.Raw)
	}
	if *pid != 0 && *pid != *r.PID {
		return fmt.Errorf("session %s: the counter's pid went from %d to %d", s.id[:8], *pid, *r.PID)
	}
	*pid = *r.PID
	return nil
}

// TestReplicasBehindHAProxy: sessions stick to the replica that created
// them, leases never cross replicas, a killed replica's sessions get 404
// and start again on the other without disturbing its sessions, and a
// drained replica finishes its calls while new sessions go elsewhere.
func TestReplicasBehindHAProxy(t *testing.T) {
	exe := requireHAProxy(t)
	cfg := writeConfig(t, replicaConfig())
	start := func(addr string) *aggregator {
		a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg},
			flags: []string{"--http", addr, "--drain-grace", "60s"}})
		a.waitLoaded()
		return a
	}
	addrs := []string{freeAddr(t), freeAddr(t)}
	replicas := []*aggregator{start(addrs[0]), start(addrs[1])}
	lb := startBalancer(t, exe, hostPort(t, replicas[0].url), hostPort(t, replicas[1].url))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// An id no replica holds: 404 through the balancer, so a client starts over.
	ghost := &rsession{url: lb.url, id: strings.Repeat("ab", 16)}
	_, err := ghost.call(ctx, "c_increment", nil, nil)
	require.ErrorIs(t, err, errGone)

	// 16 sessions at once, 5 calls each, one instance each.
	sessions := make([]*rsession, replicaSessions)
	pids := make([]int, replicaSessions)
	var wg sync.WaitGroup
	errs := make([]error, replicaSessions)
	for i := range sessions {
		sessions[i] = &rsession{url: lb.url}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = sessions[i].open(ctx); errs[i] == nil {
				errs[i] = counterRun(ctx, sessions[i], 0, 5, &pids[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "session %d", i)
	}
	on := make([][]int, 2) // session indexes by replica
	for i, s := range sessions {
		r := holder(t, replicas, s.id)
		require.NotEqual(t, -1, r, "no replica holds session %s", s.id)
		on[r] = append(on[r], i)
	}
	require.NotEmpty(t, on[0], "the balancer sent every session to one replica")
	require.NotEmpty(t, on[1], "the balancer sent every session to one replica")
	assert.Len(t, uniq(pids), replicaSessions, "each session leases its own counter")

	// Sessionless clients naming a lease: routed by the key, from the body
	// or from the Mcp-Lease header.
	for _, useHeader := range []bool{false, true} {
		for k := range 4 {
			key := fmt.Sprintf("conversation-%d-%t", k, useHeader)
			for want := 1; want <= 4; want++ {
				assert.Equal(t, want, sessionlessIncrement(t, lb.url, key, useHeader), "lease %s", key)
			}
		}
	}
	// A key a header cannot carry as it is goes as =?base64?...?=: with the
	// header or without, it reaches the same instance.
	for want := 1; want <= 6; want++ {
		assert.Equal(t, want, sessionlessIncrement(t, lb.url, "gespräch-é-ü", want%2 == 0), "non-ASCII lease, call %d", want)
	}
	r, err := sessionlessPost(ctx, lb.url, "conv", map[string]string{"Mcp-Lease": "another"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, r.status, "an Mcp-Lease header that differs from _meta: %s", r.body)
	assert.NotContains(t, string(r.body), "another", "a lease key is not echoed")

	// SIGKILL replica 0: its sessions get 404 and start again on replica 1;
	// replica 1's sessions see no failure.
	replicas[0].kill()
	errs = make([]error, replicaSessions)
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slices.Contains(on[1], i) {
				errs[i] = counterRun(ctx, s, 5, 5, &pids[i])
				return
			}
			if _, err := s.call(ctx, "c_increment", nil, nil); !errors.Is(err, errGone) {
				errs[i] = fmt.Errorf("a call of a session of the killed replica: want 404, got %v", err)
				return
			}
			pids[i] = 0
			if errs[i] = s.open(ctx); errs[i] == nil {
				errs[i] = counterRun(ctx, s, 0, 5, &pids[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "session %d", i)
	}
	for _, s := range sessions {
		require.Equal(t, 1, holder(t, replicas, s.id), "after the kill every session is on the survivor")
	}
	for _, s := range sessions {
		s.close()
	}

	// Replica 0 comes back on its address; the balancer takes it in again.
	waitLog(t, lb.log, 1, "replicas/r1 is DOWN")
	replicas[0] = start(addrs[0])
	waitLog(t, lb.log, 1, "replicas/r1 is UP")

	// Drain replica 0 while it runs slow calls: they finish, /readyz fails,
	// new sessions go to replica 1, its open sessions keep working.
	fresh := make([]*rsession, 8)
	var mine []*rsession
	for i := range fresh {
		fresh[i] = &rsession{url: lb.url}
		require.NoError(t, fresh[i].open(ctx))
		if holder(t, replicas, fresh[i].id) == 0 {
			mine = append(mine, fresh[i])
		}
	}
	require.NotEmpty(t, mine, "no new session reached the restarted replica")
	slow := make([]<-chan error, len(mine))
	for i, s := range mine {
		slow[i] = slowCall(ctx, t, s, 4)
	}
	require.NoError(t, replicas[0].cmd.Process.Signal(syscall.SIGTERM))
	_, ok := replicas[0].log.waitLine(func(l string) bool { return strings.Contains(l, "msg=draining") }, startTimeout, replicas[0].exited)
	require.True(t, ok, "the replica did not log that it drains:\n%s", replicas[0].log)
	var pid int
	require.NoError(t, counterRun(ctx, mine[0], 0, 2, &pid), "an open session keeps calling while its replica drains")

	ready := getJSON(t, "http://"+addrs[0]+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, ready.status)
	assert.Equal(t, true, ready.body["draining"], "%v", ready.body)
	assert.Contains(t, fmt.Sprint(ready.body["notReady"]), "draining")
	direct := &rsession{url: replicas[0].url}
	err = direct.open(ctx)
	require.Error(t, err, "a draining replica refuses a new session")
	assert.Contains(t, err.Error(), "HTTP 503")

	// New sessions through the balancer all succeed, on replica 1: while
	// HAProxy has not yet seen the drain, the 503 is retried there.
	for range 6 {
		s := &rsession{url: lb.url}
		require.NoError(t, s.open(ctx))
		assert.Equal(t, 1, holder(t, replicas, s.id), "a new session went to the draining replica")
		s.close()
	}
	for i, done := range slow {
		assert.NoError(t, <-done, "slow call %d on the draining replica", i)
	}

	// Its calls done, the drained replica exits by itself, with status 0.
	waitExit(t, replicas[0])
	assert.True(t, replicas[0].log.containsLine("drained: no call in flight"), "%s", replicas[0].log)
	for _, s := range fresh {
		s.close()
	}
}

// uniq counts the distinct values of list.
func uniq(list []int) map[int]bool {
	m := map[int]bool{}
	for _, v := range list {
		m[v] = true
	}
	return m
}

// sessionlessPost sends a sessionless c_increment naming lease.
func sessionlessPost(ctx context.Context, url, lease string, header map[string]string) (mcpReply, error) {
	h := map[string]string{"MCP-Protocol-Version": modernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "c_increment"}
	for k, v := range header {
		h[k] = v
	}
	return mcpPost(ctx, url, h, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "c_increment", "arguments": map[string]any{},
		"_meta": map[string]any{
			"mcp-aggregator/lease":                       lease,
			"io.modelcontextprotocol/protocolVersion":    modernVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "replicas-test", "version": "1"},
		}}}, nil)
}

// sessionlessIncrement calls c_increment sessionlessly and returns the value.
func sessionlessIncrement(t *testing.T, url, lease string, useHeader bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var h map[string]string
	if useHeader {
		value := lease
		for _, r := range lease {
			if r > 0x7e {
				value = "=?base64?" + base64.StdEncoding.EncodeToString([]byte(lease)) + "?="
				break
			}
		}
		h = map[string]string{"Mcp-Lease": value}
	}
	r, err := sessionlessPost(ctx, url, lease, h)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Nil(t, r.rpcErr)
	rep, err := leaseDecode(r.result)
	require.NoError(t, err)
	require.NotNil(t, rep.Value, "%s", r.result)
	return *rep.Value
}

// jsonAnswer is a decoded JSON answer of an operations endpoint.
type jsonAnswer struct {
	status int
	body   map[string]any
}

func getJSON(t *testing.T, url string) jsonAnswer {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var a jsonAnswer
	a.status = resp.StatusCode
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a.body))
	return a
}

// drainPost sends POST /drain with the given headers.
func drainPost(t *testing.T, a *aggregator, method string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(a.url, "/mcp")+"/drain", nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitExit waits for a to exit on its own and requires status 0.
func waitExit(t *testing.T, a *aggregator) {
	t.Helper()
	select {
	case <-a.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("the drained aggregator did not exit:\n%s", a.log)
	}
	require.NoError(t, a.waitErr, "the drained aggregator's exit:\n%s", a.log)
}

// TestDrainEndpointNeedsAnOperator: POST /drain drains only for a client
// listed in http.auth.operators; the replica then refuses new sessions,
// fails /readyz, and exits 0 once nothing runs.
func TestDrainEndpointNeedsAnOperator(t *testing.T) {
	t.Parallel()
	const opsToken, botToken = "ops-token-0123456789abcdef", "bot-token-0123456789abcdef"
	cfg := writeConfig(t, replicaConfig()+`http:
  auth:
    tokens: {ops: {env: OPS_TOKEN}, bot: {env: BOT_TOKEN}}
    operators: [ops]
`)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg},
		env: []string{"OPS_TOKEN=" + opsToken, "BOT_TOKEN=" + botToken}})
	a.waitLoaded()
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	code, _ := drainPost(t, a, http.MethodPost, nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body := drainPost(t, a, http.MethodPost, bearer(botToken))
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "http.auth.operators")
	code, _ = drainPost(t, a, http.MethodGet, bearer(opsToken))
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	ready := getJSON(t, strings.TrimSuffix(a.url, "/mcp")+"/readyz")
	require.Equal(t, http.StatusOK, ready.status, "%v", ready.body)

	// A call in flight keeps the drained replica up until it ends.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	bot := &rsession{url: a.url, token: botToken}
	require.NoError(t, bot.open(ctx))
	slow := slowCall(ctx, t, bot, 3)

	code, body = drainPost(t, a, http.MethodPost, bearer(opsToken))
	require.Equal(t, http.StatusAccepted, code, body)
	var answer map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &answer))
	assert.Equal(t, true, answer["draining"])
	assert.NotContains(t, a.log.String(), opsToken)

	ready = getJSON(t, strings.TrimSuffix(a.url, "/mcp")+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, ready.status)
	assert.Equal(t, true, ready.body["draining"])
	r, err := mcpPost(ctx, a.url, bearer(botToken), map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "drain-test", "version": "1"}}}, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.Contains(t, string(r.body), "draining")
	assert.Empty(t, r.session)

	assert.NoError(t, <-slow, "the call in flight finishes")
	waitExit(t, a)
}

// TestDrainWithoutAuthOnlyFromLoopback: without http.auth, POST /drain is
// an operator's only when it comes straight from loopback, not through a
// proxy; the open session keeps calling while its call runs, and the
// replica exits once nothing is in flight.
func TestDrainWithoutAuthOnlyFromLoopback(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, replicaConfig())}})
	a.waitLoaded()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	s := &rsession{url: a.url}
	require.NoError(t, s.open(ctx))
	var pid int
	require.NoError(t, counterRun(ctx, s, 0, 1, &pid))
	slow := slowCall(ctx, t, s, 3)

	code, body := drainPost(t, a, http.MethodPost, map[string]string{"X-Forwarded-For": "203.0.113.9"})
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "not through a proxy")
	code, body = drainPost(t, a, http.MethodPost, nil)
	require.Equal(t, http.StatusAccepted, code, body)

	// The session's lease lives here: it keeps working while draining.
	require.NoError(t, counterRun(ctx, s, 1, 2, &pid))
	assert.NoError(t, <-slow, "the call in flight finishes")
	waitExit(t, a)
	assert.True(t, a.log.containsLine("drained: no call in flight"), "%s", a.log)
}
