package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The official Go SDK client (github.com/modelcontextprotocol/go-sdk) against the
// aggregator: the SDK's own transports (CommandTransport starts the aggregator;
// StreamableClientTransport speaks HTTP), its own handshake and its own decoding.

// metaSubscriptionID is the _meta key that ties a 2026-07-28 notification to the
// subscriptions/listen stream it was delivered on.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// goSDKRig is one Go SDK client session with the aggregator, serving a config file
// the test edits (through the embedded reloadRig, whose client is unused).
type goSDKRig struct {
	*reloadRig
	version string
	session *mcp.ClientSession
	marker  string // the stdio aggregator's process tree; empty over HTTP

	mu       sync.Mutex
	notes    []notification // every notification the SDK received, in order
	changes  []notification // each call of ToolListChangedHandler
	changed  chan struct{}  // closed and replaced on every record
	streamUp chan struct{}  // closed once the SDK's standalone GET stream answered 200

	closeOnce sync.Once
	closeErr  error
	closeTook time.Duration
}

func (r *goSDKRig) record(list *[]notification, method string, params any) {
	raw, _ := json.Marshal(params)
	r.mu.Lock()
	*list = append(*list, notification{Method: method, Params: raw})
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// waitFor waits until cond holds for the notifications and handler calls so far.
func (r *goSDKRig) waitFor(what string, cond func(notes, changes []notification) bool) {
	r.t.Helper()
	deadline := time.NewTimer(reloadWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, changed := cond(r.notes, r.changes), r.changed
		notes := len(r.notes)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.t.Fatalf("%s: not within %s (%d notifications: %s); aggregator stderr:\n%s",
				what, reloadWait, notes, r.noteLog(), r.a.log)
		}
	}
}

// handled is the number of ToolListChangedHandler calls so far.
func (r *goSDKRig) handled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changes)
}

// noteLog renders the notifications received, for failure messages.
func (r *goSDKRig) noteLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, n := range r.notes {
		b.WriteString("\n  " + n.Method + " " + string(n.Params))
	}
	return b.String()
}

// streamWatch tells when the Go SDK's standalone GET stream (the session-based
// generation's channel for notifications outside any request) has been answered:
// from then on a tools/list_changed reaches the client.
type streamWatch struct {
	base http.RoundTripper
	once sync.Once
	open chan struct{}
}

func (w *streamWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		w.once.Do(func() { close(w.open) })
	}
	return resp, err
}

// startGoSDK connects a Go SDK client, asking for protocol version, to an aggregator
// serving config over tr. On stdio the SDK starts the aggregator itself.
func startGoSDK(t *testing.T, tr transport, version, config string) *goSDKRig {
	t.Helper()
	r := &goSDKRig{version: version, changed: make(chan struct{}), streamUp: make(chan struct{})}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-aggregator-gosdk-test", Version: "1.0.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			r.record(&r.changes, "notifications/tools/list_changed", req.Params)
		},
	})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				r.record(&r.notes, method, req.GetParams())
			}
			return next(ctx, method, req)
		}
	})

	path := writeConfig(t, config)
	var a *aggregator
	var sdkTransport mcp.Transport
	switch tr {
	case stdioTransport:
		r.marker = newMarker()
		a = &aggregator{t: t, transport: tr, log: newLogBuffer(), exited: make(chan struct{})}
		cmd := exec.Command(binary, "serve", "--log-level", "debug", "--config", path)
		cmd.Dir = t.TempDir()
		cmd.Env = markerEnv(r.marker)
		cmd.Stderr = a.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = 5 * time.Second
		// Longer than any grace of the aggregator's own: it ends by itself once its
		// input closes, not by the SDK's SIGTERM.
		sdkTransport = &mcp.CommandTransport{Command: cmd, TerminateDuration: stopTimeout}
	case httpTransport:
		a = startAggregator(t, tr, aggregatorOptions{configs: []string{path}})
		a.waitLoaded()
		watch := &streamWatch{base: http.DefaultTransport, open: r.streamUp}
		sdkTransport = &mcp.StreamableClientTransport{Endpoint: a.url, HTTPClient: &http.Client{Transport: watch}}
	}
	r.reloadRig = &reloadRig{t: t, a: a, path: path}

	t.Cleanup(func() {
		if r.session != nil {
			_ = r.close()
		}
		if tr == stdioTransport {
			assertNoSurvivors(t, r.marker)
		}
		if t.Failed() {
			t.Logf("notifications the Go SDK received:%s\naggregator stderr:\n%s", r.noteLog(), a.log)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	session, err := client.Connect(ctx, sdkTransport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err, "the Go SDK client could not connect; aggregator stderr:\n%s", a.log)
	r.session = session
	if tr == stdioTransport {
		go func() {
			_ = session.Wait()
			close(a.exited)
		}()
	}
	if tr == stdioTransport {
		a.waitLoaded()
	}
	return r
}

// close ends the session the SDK's way (stdio: close stdin, wait, then signals).
func (r *goSDKRig) close() error {
	r.closeOnce.Do(func() {
		start := time.Now()
		r.closeErr = r.session.Close()
		r.closeTook = time.Since(start)
	})
	return r.closeErr
}

// modern reports whether the session speaks the sessionless generation.
func (r *goSDKRig) modern() bool { return r.version >= modernVersion }

// sdkView decodes raw into the SDK's type T and encodes that again: the part of a
// payload the SDK shows its user, so that what the upstream sent and what the SDK got
// through the aggregator compare field by field.
func sdkView[T any](t testing.TB, raw []byte) any {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), "decoding %.300s", raw)
	return decodeAsJavaScript(t, mustJSON(t, v))
}

// TestGoSDKClient: the official Go SDK client, in each protocol generation it speaks
// (2026-07-28: server/discover, per-request _meta, subscriptions/listen; 2025-11-25:
// initialize, sessions, the GET stream), over stdio and streamable HTTP, lists the
// tools, calls them with the upstream's own results, and gets exactly one
// tools/list_changed (through ToolListChangedHandler) when a config reload changes
// the catalog.
func TestGoSDKClient(t *testing.T) {
	t.Parallel()
	// What the demo upstream itself sends, seen through the SDK's types.
	direct := connectDirect(t, nil, binary, "demo-server", "tools")
	wantTools := map[string]any{}
	for _, raw := range direct.listTools() {
		var tool struct {
			Name string `json:"name"`
		}
		require.NoError(t, json.Unmarshal(raw, &tool))
		wantTools[tool.Name] = sdkView[mcp.Tool](t, raw)
	}
	echoArgs := map[string]any{"text": "hello from the Go SDK"}
	addArgs := map[string]any{"a": 2, "b": 40}
	wantEcho := sdkView[mcp.CallToolResult](t, direct.callToolResult("echo", echoArgs))
	wantAdd := sdkView[mcp.CallToolResult](t, direct.callToolResult("add", addArgs))

	for _, tr := range []transport{stdioTransport, httpTransport} {
		t.Run(string(tr), func(t *testing.T) {
			t.Parallel()
			for _, version := range []string{modernVersion, protocolVersion} {
				t.Run(version, func(t *testing.T) {
					t.Parallel()
					before, after := reloadConfig("echo, add"), reloadConfig("echo, add, pid")
					r := startGoSDK(t, tr, version, before)
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					defer cancel()

					// The generation asked for, not a fallback: a 2026-07-28 client whose
					// server/discover failed would silently initialize instead.
					init := r.session.InitializeResult()
					require.NotNil(t, init)
					require.Equal(t, version, init.ProtocolVersion, "negotiated protocol version")
					if assert.NotNil(t, init.ServerInfo, "server info") {
						assert.Equal(t, "mcp-aggregator", init.ServerInfo.Name)
					}
					require.NotNil(t, init.Capabilities.Tools, "tools capability")
					assert.True(t, init.Capabilities.Tools.ListChanged, "tools.listChanged")

					// Where list_changed will arrive must be open before the reload.
					switch {
					case r.modern():
						r.waitFor("subscriptions/listen acknowledged", func(notes, _ []notification) bool {
							for _, n := range notes {
								if n.Method == "notifications/subscriptions/acknowledged" {
									return strings.Contains(string(n.Params), `"toolsListChanged":true`)
								}
							}
							return false
						})
					case tr == httpTransport:
						select {
						case <-r.streamUp:
						case <-time.After(reloadWait):
							t.Fatalf("the Go SDK's GET stream was not answered within %s", reloadWait)
						}
					}

					listed, err := r.session.ListTools(ctx, nil)
					require.NoError(t, err, "tools/list")
					got := map[string]any{}
					var names []string
					for _, tool := range listed.Tools {
						names = append(names, tool.Name)
						got[tool.Name] = decodeAsJavaScript(t, mustJSON(t, tool))
					}
					assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "add"}, names, "the tools the Go SDK sees")
					for _, name := range []string{"echo", "add"} {
						assert.Equal(t, wantTools[name], got[name], "tool %s as the Go SDK sees it", name)
					}
					if r.modern() {
						assert.Equal(t, "complete", string(listed.ResultType), "tools/list resultType")
						assert.NotEmpty(t, listed.CacheScope, "tools/list cacheScope")
					}

					// tools/call: the upstream's result, plus the resultType 2026-07-28 requires.
					for _, c := range []struct {
						name string
						args map[string]any
						want any
					}{{"echo", echoArgs, wantEcho}, {"add", addArgs, wantAdd}} {
						res, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args})
						require.NoError(t, err, "tools/call %s", c.name)
						got, info := withoutResultProtocol(t, mustJSON(t, res))
						assert.Equal(t, c.want, any(got), "%s result as the Go SDK sees it", c.name)
						if r.modern() {
							assert.Equal(t, "complete", decodeObject(t, mustJSON(t, res))["resultType"], "%s resultType", c.name)
							assertAggregatorInfo(t, info, "%s names the aggregator in _meta", c.name)
						} else {
							assert.Nil(t, info, "%s: a 2025-11-25 result has no serverInfo in _meta", c.name)
						}
					}

					// The catalog changes: one tools/list_changed, then the new tool.
					mark := r.handled()
					r.save(after)
					assert.Contains(t, r.waitReload(), "changed=true")
					r.waitFor("ToolListChangedHandler after the reload", func(_, changes []notification) bool {
						return len(changes) > mark
					})
					listed, err = r.session.ListTools(ctx, nil)
					require.NoError(t, err, "tools/list after the reload")
					names = names[:0]
					for _, tool := range listed.Tools {
						names = append(names, tool.Name)
					}
					assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "add", "pid"}, names, "the tools after the reload")
					pid, err := r.session.CallTool(ctx, &mcp.CallToolParams{Name: "pid", Arguments: map[string]any{}})
					require.NoError(t, err, "tools/call pid")
					assert.False(t, pid.IsError, "pid: %v", pid.Content)

					// An identical rewrite changes nothing; once it is done and a request
					// made a round trip, a second notification would have arrived.
					r.save(after)
					assert.Contains(t, r.waitReload(), "changed=false")
					_, err = r.session.ListTools(ctx, nil)
					require.NoError(t, err)
					assert.Equal(t, mark+1, r.handled(), "ToolListChangedHandler calls: exactly one per effective change")

					if r.modern() {
						// 2026-07-28: every list_changed belongs to the listen stream the
						// client opened, and no other kind of delivery is requested.
						r.mu.Lock()
						for _, n := range r.notes {
							if n.Method == "notifications/tools/list_changed" {
								assert.Contains(t, string(n.Params), metaSubscriptionID,
									"a 2026-07-28 client got a tools/list_changed outside its subscription: %s", n.Params)
							}
						}
						r.mu.Unlock()
					}

					require.NoError(t, r.close(), "the aggregator's exit, as the SDK's Close reports it")
					t.Logf("the SDK's Close took %s", r.closeTook)
				})
			}
		})
	}
}
