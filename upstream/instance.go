package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// DefaultProtocol is the handshake version used unless a server's config
// pins another one. Pinning it avoids mcp-go's server/discover probe, which
// many third-party servers answer slowly or not at all.
const DefaultProtocol = "2025-11-25"

// Options are the dependencies of an Instance.
type Options struct {
	Logger        *slog.Logger
	ClientName    string
	ClientVersion string
	// OnToolsChanged runs on a goroutine of its own when the upstream sends
	// notifications/tools/list_changed, never twice at once: notifications
	// that arrive while it runs are folded into one more run after it. So
	// it always runs once after the last notification, however many came.
	OnToolsChanged func(*Instance)
	// StdinGrace and TermGrace shorten the shutdown sequence; zero means the default.
	StdinGrace, TermGrace time.Duration
	// MaxMessage bounds one message from the upstream, in bytes (0:
	// jsonrpc.DefaultMaxMessage). A response over it fails its call at once.
	MaxMessage int
	// Reaper, when set, learns every stdio process group, so that nothing
	// survives even if the aggregator is killed outright.
	Reaper *Reaper
}

// Tool is one upstream tool definition exactly as the upstream sent it.
type Tool struct {
	Name string
	Raw  json.RawMessage
}

// Instance is one running, initialized upstream server.
type Instance struct {
	server   string
	conn     conn
	pid      int
	protocol string
	tools    []Tool
	log      *slog.Logger
	// toolsChanged runs OnToolsChanged, coalesced (nil without one).
	toolsChanged *coalescer

	nextToken atomic.Int64
	progMu    sync.Mutex
	progress  map[string]func(json.RawMessage)
}

// Start spawns or connects to srv, performs the initialize handshake and
// lists its tools. ctx bounds all of it (connect_timeout).
func Start(ctx context.Context, srv *config.Server, opts Options) (*Instance, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = scrubbingLogger(log, srv)
	inst := &Instance{server: srv.ID, log: log, progress: map[string]func(json.RawMessage){}}
	if onTools := opts.OnToolsChanged; onTools != nil {
		inst.toolsChanged = newCoalescer(func() {
			select {
			case <-inst.Done():
				return // nothing to re-list on an instance that is gone
			default:
				onTools(inst)
			}
		})
	}
	var err error
	switch srv.Transport {
	case config.TransportStdio, "":
		err = inst.spawn(srv, opts)
	case config.TransportHTTP, config.TransportSSE:
		err = inst.connect(ctx, srv, opts)
	default:
		err = fmt.Errorf("transport %q is not supported", srv.Transport)
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", srv.ID, err)
	}
	if err := inst.initialize(ctx, srv, opts); err != nil {
		_ = inst.Close()
		return nil, err
	}
	tools, err := inst.ListTools(ctx)
	if err != nil {
		_ = inst.Close()
		return nil, err
	}
	inst.tools = tools
	return inst, nil
}

func (i *Instance) spawn(srv *config.Server, opts Options) error {
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Dir = srv.Cwd
	cmd.Env = environ(srv.Env)
	stdinGrace, termGrace := opts.StdinGrace, opts.TermGrace
	if stdinGrace == 0 {
		stdinGrace = defaultStdinGrace
	}
	if termGrace == 0 {
		termGrace = defaultTermGrace
	}
	c, err := startStdio(srv.ID, cmd, i.log, stdioOptions{
		onNotify: i.notified, maxMessage: opts.MaxMessage, stdinGrace: stdinGrace, termGrace: termGrace,
	})
	if err != nil {
		return err
	}
	if opts.Reaper != nil {
		pgid := c.proc.pgid
		opts.Reaper.Track(pgid)
		go func() {
			<-c.stopped
			opts.Reaper.Untrack(pgid)
		}()
	}
	i.conn, i.pid = c, c.pid()
	return nil
}

func (i *Instance) connect(ctx context.Context, srv *config.Server, opts Options) error {
	var t transport.Interface
	var err error
	maxMessage := opts.MaxMessage
	if maxMessage <= 0 {
		maxMessage = jsonrpc.DefaultMaxMessage
	}
	// Enough idle connections that concurrent calls reuse them instead of
	// opening (and leaving in TIME_WAIT) a connection per call; every body
	// bounded to maxMessage per message.
	base := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 90 * time.Second}
	hc := &http.Client{Transport: &limitedTransport{base: base, max: maxMessage, server: srv.ID, log: i.log}}
	if srv.Transport == config.TransportSSE {
		t, err = transport.NewSSE(srv.URL, transport.WithHeaders(srv.Headers), transport.WithHTTPClient(hc))
	} else {
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(srv.Headers), transport.WithHTTPLogger(i.log), transport.WithHTTPBasicClient(hc),
			// The GET stream carries what the server sends outside any
			// request, tools/list_changed above all.
			transport.WithContinuousListening()}
		if srv.SessionID != "" {
			opts = append(opts, transport.WithSession(srv.SessionID))
		}
		t, err = transport.NewStreamableHTTP(srv.URL, opts...)
	}
	if err != nil {
		return err
	}
	// The transport's streams live as long as the connection, so they get a
	// context of their own; ctx (connect_timeout) bounds only the wait.
	life, end := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- t.Start(life) }()
	select {
	case err = <-started:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		end()
		_ = t.Close()
		return fmt.Errorf("connect %s: %w", srv.URL, err)
	}
	i.conn = newRemoteConn(srv.ID, t, i.log, life, end, i.notified, nil)
	return nil
}

type initializeResult struct {
	ProtocolVersion string `json:"protocolVersion"`
}

func (i *Instance) initialize(ctx context.Context, srv *config.Server, opts Options) error {
	version := srv.Protocol
	if version == "" || version == "auto" {
		version = DefaultProtocol
	}
	name, ver := opts.ClientName, opts.ClientVersion
	if name == "" {
		name = "mcp-aggregator"
	}
	params := map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": name, "version": ver},
	}
	raw, err := i.conn.call(ctx, "initialize", params)
	if err != nil {
		return fmt.Errorf("server %q: initialize: %w", i.server, i.explain(ctx, err))
	}
	var res initializeResult
	if err := json.Unmarshal(raw, &res); err != nil || res.ProtocolVersion == "" {
		return fmt.Errorf("server %q: initialize: the result has no protocolVersion; is this an MCP server?", i.server)
	}
	i.protocol = res.ProtocolVersion
	if hc, ok := i.conn.(*remoteConn); ok {
		if pv, ok := hc.t.(transport.HTTPConnection); ok {
			pv.SetProtocolVersion(res.ProtocolVersion)
		}
	}
	if err := i.conn.notify(ctx, "notifications/initialized", nil); err != nil {
		return fmt.Errorf("server %q: notifications/initialized: %w", i.server, err)
	}
	return nil
}

// explain turns a bare context error into one that says what was waited for.
func (i *Instance) explain(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("no answer before connect_timeout; check that the command starts an MCP server on stdio, or raise connect_timeout: %w", err)
	}
	return err
}

type listResult struct {
	Tools      []json.RawMessage `json:"tools"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// ListTools fetches the upstream's whole tool list, following pagination.
func (i *Instance) ListTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	cursor := ""
	for page := 0; ; page++ {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := i.conn.call(ctx, "tools/list", params)
		if err != nil {
			return nil, fmt.Errorf("server %q: tools/list: %w", i.server, i.explain(ctx, err))
		}
		var res listResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("server %q: tools/list: malformed result: %v", i.server, err)
		}
		for _, t := range res.Tools {
			var head struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(t, &head); err != nil || head.Name == "" {
				i.log.Warn("upstream listed a tool without a name; ignored", "server", i.server)
				continue
			}
			tools = append(tools, Tool{Name: head.Name, Raw: t})
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			return tools, nil
		}
		if page > 1000 {
			return nil, fmt.Errorf("server %q: tools/list: more than 1000 pages; the server's pagination does not end", i.server)
		}
		cursor = res.NextCursor
	}
}

// Call is one tools/call to forward.
type Call struct {
	Name      string          // the upstream's original tool name
	Arguments json.RawMessage // forwarded byte for byte; nil sends none
	// Meta holds the caller's _meta keys other than progressToken.
	Meta map[string]json.RawMessage
	// ProgressToken is the caller's token (raw JSON); with OnProgress set,
	// upstream progress notifications for this call are handed to OnProgress
	// with their progressToken replaced by this one. The upstream sees a
	// token of the instance's own, unique per call, so two callers that use
	// the same token never see each other's progress.
	ProgressToken json.RawMessage
	// OnProgress is called on the goroutine that reads the upstream, in the
	// order the notifications arrived. It must not block: every other
	// message of the instance waits while it runs, so a caller that cannot
	// deliver at once queues (or drops) the notification.
	OnProgress func(params json.RawMessage)
}

type callParams struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments,omitempty"`
	Meta      map[string]json.RawMessage `json:"_meta,omitempty"`
}

// CallTool forwards a call and returns the upstream's result as raw JSON.
// An upstream JSON-RPC error is returned as *RPCError, intact. ctx bounds
// the whole call, the write of the request included: an upstream that does
// not read cannot hold the caller past its deadline. A response over
// Options.MaxMessage fails the call at once (the error wraps
// *jsonrpc.TooLongError).
func (i *Instance) CallTool(ctx context.Context, call Call) (json.RawMessage, error) {
	p := callParams{Name: call.Name, Arguments: call.Arguments, Meta: call.Meta}
	if call.OnProgress != nil && len(call.ProgressToken) > 0 {
		// Each call gets a token unique on this instance, so progress from a
		// shared upstream can never reach another session's call.
		token := "agg-" + strconv.FormatInt(i.nextToken.Add(1), 10)
		meta := make(map[string]json.RawMessage, len(call.Meta)+1)
		for k, v := range call.Meta {
			meta[k] = v
		}
		meta["progressToken"], _ = rawjson.Marshal(token)
		p.Meta = meta
		downstream := call.ProgressToken
		i.progMu.Lock()
		i.progress[token] = func(params json.RawMessage) { call.OnProgress(retoken(params, downstream)) }
		i.progMu.Unlock()
		defer func() {
			i.progMu.Lock()
			delete(i.progress, token)
			i.progMu.Unlock()
		}()
	}
	params, err := encodeCallParams(p)
	if err != nil {
		return nil, err
	}
	return i.conn.call(ctx, "tools/call", params)
}

// encodeCallParams writes tools/call params around the already-encoded
// arguments, which go out exactly as the client sent them; reflecting over
// them with encoding/json would also re-validate and re-compact them.
func encodeCallParams(p callParams) (json.RawMessage, error) {
	b := make([]byte, 0, len(p.Name)+len(p.Arguments)+32)
	b = append(b, `{"name":`...)
	b = rawjson.AppendString(b, p.Name)
	if len(p.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, p.Arguments...)
	}
	if len(p.Meta) > 0 {
		meta, err := rawjson.Marshal(p.Meta)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	return append(b, '}'), nil
}

// retoken replaces progressToken in a progress notification's params.
func retoken(params json.RawMessage, token json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(params, &fields); err != nil {
		return params
	}
	fields["progressToken"] = token
	out, err := rawjson.Marshal(fields)
	if err != nil {
		return params
	}
	return out
}

// notified handles a notification of the upstream. It runs on the
// connection's reader, so nothing here may block: progress is handed to a
// non-blocking callback, and other work is coalesced onto a goroutine.
func (i *Instance) notified(n Notification) {
	switch n.Method {
	case "notifications/progress":
		var head struct {
			Token json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(n.Params, &head) != nil {
			return
		}
		var token string
		if json.Unmarshal(head.Token, &token) != nil {
			return
		}
		i.progMu.Lock()
		deliver := i.progress[token]
		i.progMu.Unlock()
		if deliver != nil {
			deliver(n.Params)
		}
	case "notifications/tools/list_changed":
		if i.toolsChanged != nil {
			i.toolsChanged.trigger()
		}
	}
}

// Ping checks that the upstream answers.
func (i *Instance) Ping(ctx context.Context) error {
	_, err := i.conn.call(ctx, "ping", nil)
	return err
}

// Server is the id of the configured server this instance runs.
func (i *Instance) Server() string { return i.server }

// Tools is the tool list fetched when the instance started.
func (i *Instance) Tools() []Tool { return i.tools }

// PID is the process id of a stdio instance, 0 for remote ones.
func (i *Instance) PID() int { return i.pid }

// Protocol is the protocol version the upstream agreed to.
func (i *Instance) Protocol() string { return i.protocol }

// Done is closed when the instance is gone, by Close or by dying.
func (i *Instance) Done() <-chan struct{} { return i.conn.done() }

// Err says why the instance is gone, once Done is closed.
func (i *Instance) Err() error { return i.conn.err() }

// Close shuts the instance down and waits until nothing of it is left. It
// unblocks every pending call, read and write at once, and the shutdown
// sequence's grace periods bound how long it takes, even for a process that
// is stopped or ignores SIGTERM.
func (i *Instance) Close() error { return i.conn.close() }
