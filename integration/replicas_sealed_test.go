package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
)

// End-to-end tests of sealed session ids (serve --session-key-file): two
// replicas sharing a key behind HAProxy, driven by sessions of the
// TypeScript SDK client (node/sessionsclient.mjs).

// writeKeyFile writes a key file of fresh random keys, one a line, base64.
func writeKeyFile(t *testing.T, path string, n int) []string {
	t.Helper()
	var keys []string
	for range n {
		var k [32]byte
		_, _ = rand.Read(k[:])
		keys = append(keys, base64.StdEncoding.EncodeToString(k[:]))
	}
	writeKeys(t, path, keys...)
	return keys
}

// writeKeys replaces the key file by rename, as a Secret update does.
func writeKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(strings.Join(keys, "\n")+"\n"), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// sdkSessions is a running node/sessionsclient.mjs.
type sdkSessions struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

type sdkCall struct {
	Session   int            `json:"session"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

type sdkCallResult struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Status  *int   `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

func startSDKSessions(t *testing.T, url string) *sdkSessions {
	t.Helper()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", filepath.Join(nodeDir, "sessionsclient.mjs"), url)
	cmd.Dir = t.TempDir()
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := newLogBuffer()
	cmd.Stderr = stderr
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(stopTimeout):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			t.Logf("sessionsclient.mjs stderr:\n%s", stderr)
		}
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	return &sdkSessions{t: t, in: in, out: sc}
}

// do sends one command and decodes its answer into v.
func (s *sdkSessions) do(cmd map[string]any, v any) {
	s.t.Helper()
	line, err := json.Marshal(cmd)
	require.NoError(s.t, err)
	_, err = s.in.Write(append(line, '\n'))
	require.NoError(s.t, err)
	require.True(s.t, s.out.Scan(), "sessionsclient.mjs ended: %v", s.out.Err())
	var fatal struct{ Fatal string }
	require.NoError(s.t, json.Unmarshal(s.out.Bytes(), &fatal), "%s", s.out.Bytes())
	require.Empty(s.t, fatal.Fatal)
	require.NoError(s.t, json.Unmarshal(s.out.Bytes(), v))
}

func (s *sdkSessions) open(n int) []string {
	s.t.Helper()
	var a struct{ IDs []string }
	s.do(map[string]any{"op": "open", "sessions": n}, &a)
	require.Len(s.t, a.IDs, n)
	return a.IDs
}

func (s *sdkSessions) ids() []string {
	s.t.Helper()
	var a struct{ IDs []string }
	s.do(map[string]any{"op": "ids"}, &a)
	return a.IDs
}

func (s *sdkSessions) round(calls []sdkCall) []sdkCallResult {
	s.t.Helper()
	var a struct{ Results []sdkCallResult }
	s.do(map[string]any{"op": "round", "calls": calls}, &a)
	require.Len(s.t, a.Results, len(calls))
	return a.Results
}

// startSealedReplicas starts two replicas sharing keyFile, labelled r1 and r2.
func startSealedReplicas(t *testing.T, config, keyFile string) ([]*aggregator, []string) {
	t.Helper()
	addrs := []string{freeAddr(t), freeAddr(t)}
	replicas := make([]*aggregator, 2)
	for i := range replicas {
		replicas[i] = startAggregator(t, httpTransport, aggregatorOptions{configs: []string{config},
			flags: []string{"--http", addrs[i], "--session-key-file", keyFile, "--session-id-prefix", fmt.Sprintf("r%d-", i+1)}})
	}
	for _, a := range replicas {
		a.waitLoaded()
	}
	return replicas, addrs
}

// TestSealedReplicasSurviveAKill: 20 SDK sessions through HAProxy, half of
// them holding a lease; one replica is killed with SIGKILL. The unleased
// sessions go on without a failure or a new initialize; the leased ones of
// the killed replica go on with a fresh instance and a notice saying so;
// the survivor's sessions see nothing at all.
func TestSealedReplicasSurviveAKill(t *testing.T) {
	exe := requireHAProxy(t)
	keyFile := filepath.Join(t.TempDir(), "session.keys")
	writeKeyFile(t, keyFile, 1)
	replicas, _ := startSealedReplicas(t, writeConfig(t, replicaConfig()), keyFile)
	lb := startBalancer(t, exe, hostPort(t, replicas[0].url), hostPort(t, replicas[1].url))

	const n = 20
	client := startSDKSessions(t, lb.url)
	ids := client.open(n)
	leased := func(i int) bool { return i%2 == 0 }
	onKilled := func(i int) bool { return strings.HasPrefix(ids[i], "r1-.") }
	var killedLeased, killedFree int
	for i, id := range ids {
		require.True(t, strings.HasPrefix(id, "r1-.") || strings.HasPrefix(id, "r2-."), "a sealed id names its replica: %s", id)
		if onKilled(i) && leased(i) {
			killedLeased++
		} else if onKilled(i) {
			killedFree++
		}
	}
	require.NotZero(t, killedLeased, "no leased session on the replica to kill: %v", ids)
	require.NotZero(t, killedFree, "no unleased session on the replica to kill: %v", ids)

	calls := make([]sdkCall, n)
	for i := range calls {
		if leased(i) {
			calls[i] = sdkCall{Session: i, Name: "c_increment"}
		} else {
			calls[i] = sdkCall{Session: i, Name: "d_echo", Arguments: map[string]any{"text": fmt.Sprintf("s%d", i)}}
		}
	}
	check := func(round int, results []sdkCallResult, want func(i int) (value int, moved bool)) {
		t.Helper()
		for i, r := range results {
			require.Nil(t, r.Error, "round %d, session %d (%s): %+v", round, i, ids[i], r.Error)
			rep, err := leaseDecode(r.Result)
			require.NoError(t, err)
			require.False(t, rep.IsError, "round %d, session %d: %s", round, i, rep.Raw)
			if !leased(i) {
				assert.Equal(t, fmt.Sprintf("s%d", i), rep.Texts[0], "round %d, session %d", round, i)
				assert.Len(t, rep.Texts, 1, "round %d, session %d: a shared server's call has no notice", round, i)
				continue
			}
			value, moved := want(i)
			require.NotNil(t, rep.Value, "%s", rep.Raw)
			assert.Equal(t, value, *rep.Value, "round %d, session %d: the counter", round, i)
			notice := strings.Join(rep.Texts, "\n")
			if moved {
				assert.Contains(t, notice, `moved here from replica "r1"`, "round %d, session %d: the notice of the lost instance", round, i)
				assert.Contains(t, notice, "lost with its state")
			} else {
				assert.NotContains(t, notice, "moved here", "round %d, session %d", round, i)
			}
		}
	}
	for round := 1; round <= 2; round++ {
		check(round, client.round(calls), func(int) (int, bool) { return round, false })
	}

	replicas[0].kill()
	for round := 3; round <= 5; round++ {
		check(round, client.round(calls), func(i int) (int, bool) {
			if onKilled(i) {
				return round - 2, round == 3 // a fresh instance, told once
			}
			return round, false
		})
	}
	assert.Equal(t, ids, client.ids(), "no session initialized again")
	taken := 0
	for _, line := range strings.Split(replicas[1].log.String(), "\n") {
		if strings.Contains(line, "session taken up from another replica") {
			taken++
			assert.Contains(t, line, "from=r1")
		}
	}
	assert.Equal(t, killedLeased+killedFree, taken, "each session of the killed replica was taken up once")
}

// roundRobinConfig is deploy/haproxy/haproxy.cfg without affinity: the
// stick table and its rules are left out, so each request goes to the next
// replica.
func roundRobinConfig(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "deploy", "haproxy", "haproxy-roundrobin.cfg"))
	require.NoError(t, err)
	return path
}

// TestSealedReplicasRoundRobin: with the key and a catalog of shared
// servers only, plain round-robin serves 8 SDK sessions' calls spread over
// both replicas without a failure, and every session is served by both.
// MCP_AGGREGATOR_ROUNDROBIN_SECONDS sets how long the calls go on (30 by
// default).
func TestSealedReplicasRoundRobin(t *testing.T) {
	exe := requireHAProxy(t)
	seconds := 30
	if v := os.Getenv("MCP_AGGREGATOR_ROUNDROBIN_SECONDS"); v != "" {
		_, err := fmt.Sscan(v, &seconds)
		require.NoError(t, err)
	}
	roundRobin(t, exe, 8, time.Duration(seconds)*time.Second)
}

func roundRobin(t *testing.T, exe string, clients int, d time.Duration) {
	keyFile := filepath.Join(t.TempDir(), "session.keys")
	writeKeyFile(t, keyFile, 1)
	replicas, _ := startSealedReplicas(t, writeConfig(t, leaseConfig(leaseBlock("d", "tools", true))), keyFile)
	lb := startBalancerWith(t, exe, roundRobinConfig(t), hostPort(t, replicas[0].url), hostPort(t, replicas[1].url))

	client := startSDKSessions(t, lb.url)
	ids := client.open(clients)
	calls := make([]sdkCall, clients)
	for i := range calls {
		calls[i] = sdkCall{Session: i, Name: "d_echo", Arguments: map[string]any{"text": fmt.Sprintf("c%d", i)}}
	}
	total := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i, r := range client.round(calls) {
			require.Nil(t, r.Error, "session %d: %+v", i, r.Error)
			rep, err := leaseDecode(r.Result)
			require.NoError(t, err)
			require.Equal(t, []string{fmt.Sprintf("c%d", i)}, rep.Texts)
			total++
		}
	}
	assert.Equal(t, ids, client.ids(), "no session initialized again")
	// Each session began on one replica and was taken up by the other.
	for _, id := range ids {
		digest := downstream.SessionDigest(id)
		var on []int
		for i, a := range replicas {
			log := a.log.String()
			if strings.Contains(log, "session="+digest) {
				on = append(on, i)
			}
		}
		assert.Equal(t, []int{0, 1}, on, "session %s is served by both replicas", digest)
	}
	t.Logf("%d calls of %d sessions over %s, round-robin", total, clients, d)
}

// TestSealedSessionKeyRotation: the key file is rotated while the replicas
// run: a new key put first seals the next ids while the old one still
// opens the earlier ones; once the old key is removed, ids sealed with it
// get 404 on a replica that did not hold them open. A file that does not
// load leaves the keys in force, and no key is ever logged.
func TestSealedSessionKeyRotation(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "session.keys")
	old := writeKeyFile(t, keyFile, 1)[0]
	replicas, _ := startSealedReplicas(t, writeConfig(t, leaseConfig(leaseBlock("d", "tools", true))), keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opened := func() *rsession {
		s := &rsession{url: replicas[0].url}
		require.NoError(t, s.open(ctx))
		return s
	}
	// callOn calls d_echo in s's session on replica i.
	callOn := func(i int, s *rsession) error {
		moved := &rsession{url: replicas[i].url, id: s.id}
		moved.seq.Store(s.seq.Add(1000))
		_, err := moved.call(ctx, "d_echo", map[string]any{"text": "x"}, nil)
		return err
	}
	reloaded := func(keys int) {
		for _, a := range replicas {
			_, ok := a.log.waitLine(func(l string) bool {
				return strings.Contains(l, "session keys reloaded") && strings.Contains(l, fmt.Sprintf("keys=%d", keys))
			}, startTimeout, a.exited)
			require.True(t, ok, "the replica did not reload its keys:\n%s", a.log)
		}
	}

	before, beforeKept, never := opened(), opened(), opened()
	require.NoError(t, callOn(1, before), "the other replica takes the session up")

	var fresh [32]byte
	_, _ = rand.Read(fresh[:])
	next := base64.StdEncoding.EncodeToString(fresh[:])
	writeKeys(t, keyFile, next, old)
	reloaded(2)
	after := opened()
	require.NoError(t, callOn(1, after), "an id sealed with the new key")
	require.NoError(t, callOn(1, beforeKept), "an id sealed with the old key, still in the file")

	writeKeys(t, keyFile, "# the old key is gone", next)
	reloaded(1)
	require.NoError(t, callOn(0, never), "a session open on its replica stays open")
	require.NoError(t, callOn(1, before), "and so does one taken up before")
	require.ErrorIs(t, callOn(1, never), errGone, "an id sealed with the removed key opens no more")
	later := opened()
	require.NoError(t, callOn(1, later), "an id sealed with the key in force")

	writeKeys(t, keyFile, "too-short-to-be-a-key")
	for _, a := range replicas {
		_, ok := a.log.waitLine(func(l string) bool {
			return strings.Contains(l, "does not load") && strings.Contains(l, "session.keys:1")
		}, startTimeout, a.exited)
		require.True(t, ok, "no error naming the file and line:\n%s", a.log)
	}
	later2 := opened()
	require.NoError(t, callOn(1, later2), "the keys in force stay")
	for _, a := range replicas {
		assert.NotContains(t, a.log.String(), old)
		assert.NotContains(t, a.log.String(), next)
	}
}

// TestSessionKeyFileRefused: a key file that does not load stops serve at
// start with an error naming the file and line, never the key; so does a
// key file without --http.
func TestSessionKeyFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	bad := filepath.Join(dir, "bad.keys")
	require.NoError(t, os.WriteFile(bad, []byte("# keys\n"+short+"\n"), 0o600))
	cfg := writeConfig(t, leaseConfig(leaseBlock("d", "tools", true)))
	res := runCLI(t, "serve", "--config", cfg, "--http", "127.0.0.1:0", "--session-key-file", bad)
	assert.Equal(t, 2, res.code)
	assert.Contains(t, res.stderr, bad+":2: the key is 16 bytes")
	assert.Contains(t, res.stderr, "head -c 32 /dev/urandom | base64")
	assert.NotContains(t, res.stderr, short)

	res = runCLI(t, "serve", "--config", cfg, "--session-key-file", bad)
	assert.Equal(t, 2, res.code)
	assert.Contains(t, res.stderr, "--session-key-file needs --http")
}

// TestSealedDrainedSessionsContinue: with the key, the sessions of a
// replica drained and gone go on at the other one instead of starting
// over.
func TestSealedDrainedSessionsContinue(t *testing.T) {
	exe := requireHAProxy(t)
	keyFile := filepath.Join(t.TempDir(), "session.keys")
	writeKeyFile(t, keyFile, 1)
	replicas, _ := startSealedReplicas(t, writeConfig(t, leaseConfig(leaseBlock("d", "tools", true))), keyFile)
	lb := startBalancer(t, exe, hostPort(t, replicas[0].url), hostPort(t, replicas[1].url))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mine []*rsession
	for range 6 {
		s := &rsession{url: lb.url}
		require.NoError(t, s.open(ctx))
		_, err := s.call(ctx, "d_echo", map[string]any{"text": "before"}, nil)
		require.NoError(t, err)
		if strings.HasPrefix(s.id, "r1-.") {
			mine = append(mine, s)
		}
	}
	require.NotEmpty(t, mine, "no session reached the replica to drain")
	require.NoError(t, replicas[0].cmd.Process.Signal(syscall.SIGTERM))
	waitExit(t, replicas[0])
	for _, s := range mine {
		r, err := s.call(ctx, "d_echo", map[string]any{"text": "after"}, nil)
		require.NoError(t, err, "a drained replica's session goes on elsewhere")
		assert.Equal(t, []string{"after"}, r.Texts)
	}
}

// TestSealedSessionTaskOfAnotherReplica: a session taken up by another
// replica finds there no task it started on the first, and the answer
// says why.
func TestSealedSessionTaskOfAnotherReplica(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "session.keys")
	writeKeyFile(t, keyFile, 1)
	replicas, _ := startSealedReplicas(t, writeConfig(t, tasksConfig(t)), keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &rsession{url: replicas[0].url}
	require.NoError(t, s.open(ctx))
	r, err := mcpPost(ctx, s.url, s.header(), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "a_countdown", "arguments": map[string]any{"label": "long", "steps": 1000, "stepMs": 100}, "task": map[string]any{"ttl": 60000}}}, nil)
	require.NoError(t, err)
	require.Nil(t, r.rpcErr, "%s", r.rpcErr)
	var created struct{ Task taskObject }
	require.NoError(t, json.Unmarshal(r.result, &created))
	require.NotEmpty(t, created.Task.TaskID, "%s", r.result)

	get := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": map[string]any{"taskId": created.Task.TaskID}}
	r, err = mcpPost(ctx, replicas[0].url, s.header(), get, nil)
	require.NoError(t, err)
	require.Nil(t, r.rpcErr, "the task is found where it runs: %s", r.rpcErr)

	r, err = mcpPost(ctx, replicas[1].url, s.header(), get, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var e taskError
	require.NoError(t, json.Unmarshal(r.rpcErr, &e), "tasks/get on the other replica must fail: %s", r.result)
	assert.Contains(t, e.Message, "not found")
	assert.Contains(t, e.Message, `moved here from replica "r1"`)
}
