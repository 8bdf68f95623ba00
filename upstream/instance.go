package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

// DefaultProtocol is the handshake version used unless a server's config
// pins another one. Pinning it avoids probing with server/discover, which
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
	// It is OnListChanged for "tools"; when both are set, both run, this one
	// first, in the same run.
	OnToolsChanged func(*Instance)
	// OnListChanged runs when the upstream sends
	// notifications/<kind>/list_changed, for kind "tools", "resources" or
	// "prompts", coalesced per kind as OnToolsChanged is: never twice at
	// once for one kind, always once after the last notification of it.
	OnListChanged func(inst *Instance, kind string)
	// OnNotification receives, raw, every other notification of the
	// upstream (notifications/message, notifications/resources/updated,
	// notifications/tasks/status, ...): all but progress (see
	// Request.OnProgress), list_changed (above) and the upstream's
	// cancellation of its own requests (which ends their handler's context).
	// It runs on the goroutine that reads the upstream and must not block.
	OnNotification func(inst *Instance, n Notification)
	// StdinGrace and TermGrace shorten the shutdown sequence; zero means the default.
	StdinGrace, TermGrace time.Duration
	// MaxMessage bounds one message from the upstream, in bytes (0:
	// jsonrpc.DefaultMaxMessage). A response over it fails its call at once.
	MaxMessage int
	// Authorize gives the HTTP transport of a remote server that needs
	// authorization (auth: {type: oauth}) its credentials: it wraps base,
	// or fails saying what to do (log in). Without it such a server
	// cannot start.
	Authorize func(srv *config.Server, base http.RoundTripper) (http.RoundTripper, error)
	// Supervisor, when set, tracks every process of each stdio instance
	// (cgroup, subreaper, tags) and keeps the reaper, so that nothing
	// survives the instance, even if the aggregator is killed outright.
	Supervisor *supervise.Supervisor
	// Secrets, when set, are every secret the aggregator knows, of every
	// server: what an instance says about itself (a stdio server's last
	// words) is scrubbed of them besides its own server's (Scrub), since a
	// server may print a value another holds too.
	Secrets *redact.Set
}

// Instance is one running, initialized upstream server.
type Instance struct {
	leftOut   atomic.Pointer[[]string] // see LeftOut
	server    string
	conn      conn
	pid       int
	protocol  string
	caps      Capabilities
	tools     []Tool
	resources []Resource
	templates []ResourceTemplate
	prompts   []Prompt
	log       *slog.Logger
	// listChanged runs OnToolsChanged and OnListChanged, coalesced per kind
	// (no entry for a kind without a handler).
	listChanged    map[string]*coalescer
	onNotification func(*Instance, Notification)

	nextToken atomic.Int64
	progMu    sync.Mutex
	progress  map[int64]*progressSink // by the key its token names (progressKeyOf)
	flights   flights
	// listen is a sessionless upstream's subscriptions/listen stream
	// (modern.go).
	listen listenState
	// declaredExt is the extensions object declared to the upstream as a
	// client (hostext.go).
	declaredExt json.RawMessage
}

// listKinds are the kinds of list an upstream may announce changes of.
var listKinds = []string{"tools", "resources", "prompts"}

// Start spawns or connects to srv, performs the initialize handshake
// (declaring the client capabilities the aggregator relays: sampling,
// elicitation, roots), asks an upstream that declares logging for every
// log message (logging/setLevel debug), and lists its tools, resources,
// resource templates and prompts. ctx bounds all of it (connect_timeout).
// Only a failure to list the tools of an upstream that declares tools
// fails the start; the other lists are left empty with a warning.
func Start(ctx context.Context, srv *config.Server, opts Options) (*Instance, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = scrubbingLogger(log, srv)
	inst := &Instance{server: srv.ID, log: log, progress: map[int64]*progressSink{},
		listChanged: map[string]*coalescer{}, onNotification: opts.OnNotification}
	for _, kind := range listKinds {
		onTools, onList := opts.OnToolsChanged, opts.OnListChanged
		if kind != "tools" {
			onTools = nil
		}
		if onTools == nil && onList == nil {
			continue
		}
		inst.listChanged[kind] = newCoalescer(func() {
			select {
			case <-inst.Done():
				return // nothing to re-list on an instance that is gone
			default:
			}
			if onTools != nil {
				onTools(inst)
			}
			if onList != nil {
				onList(inst, kind)
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
	if err := inst.listAtStart(ctx); err != nil {
		_ = inst.Close()
		return nil, err
	}
	if c, ok := inst.conn.(*stdioConn); ok {
		c.started.Store(true)
	}
	inst.follow()
	return inst, nil
}

func (i *Instance) spawn(srv *config.Server, opts Options) error {
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Dir = srv.Cwd
	cmd.Env = processEnv(srv, os.Environ())
	if opts.Secrets != nil {
		// Before the process can print them: its stderr is scrubbed of them.
		opts.Secrets.Add(inheritedSecrets(srv, cmd.Env)...)
	}
	stdinGrace, termGrace := opts.StdinGrace, opts.TermGrace
	if stdinGrace == 0 {
		stdinGrace = supervise.DefaultStdinGrace
	}
	if termGrace == 0 {
		termGrace = supervise.DefaultTermGrace
	}
	c, err := startStdio(srv.ID, cmd, i.log, stdioOptions{
		onNotify: i.notified, onRequest: i.serverRequest, maxMessage: opts.MaxMessage, stdinGrace: stdinGrace, termGrace: termGrace,
		supervisor: opts.Supervisor,
		scrub:      scrubOfSaid(srv, opts.Secrets),
	})
	if err != nil {
		return err
	}
	i.conn, i.pid = c, c.pid()
	return nil
}

func (i *Instance) connect(ctx context.Context, srv *config.Server, opts Options) error {
	c, err := dialRemote(ctx, srv, i.log, remoteOptions{
		onNotify: i.notified, onRequest: i.serverRequest, maxMessage: opts.MaxMessage, authorize: opts.Authorize,
		scrub: scrubOfSaid(srv, opts.Secrets),
	})
	if err != nil {
		return err
	}
	i.conn = c
	return nil
}

type initializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
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
	caps, ext := capabilitiesFor(ctx)
	i.declaredExt = ext
	if protocol.Modern(version) {
		return i.discover(ctx, srv, version, name, ver, caps)
	}
	params := map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
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
	if !slices.Contains(mcp.LegacyProtocolVersions(), res.ProtocolVersion) {
		// The initialize handshake negotiates only the versions that have
		// it; the client disconnects from a server whose version it does
		// not speak.
		return violation("server %q: initialize: the server answered with protocol version %q, which the aggregator does not speak over initialize (it speaks %s); set protocol: to a version the server supports",
			i.server, preview([]byte(res.ProtocolVersion)), strings.Join(mcp.LegacyProtocolVersions(), ", "))
	}
	i.protocol = res.ProtocolVersion
	i.caps = parseCapabilities(res.Capabilities)
	if rc, ok := i.conn.(*remoteConn); ok {
		rc.setProtocol(res.ProtocolVersion)
	}
	if err := i.conn.notify(ctx, "notifications/initialized", nil); err != nil {
		return fmt.Errorf("server %q: notifications/initialized: %w", i.server, err)
	}
	if rc, ok := i.conn.(*remoteConn); ok {
		rc.awaitStream(ctx)
	}
	if i.caps.Logging {
		// Everything the upstream logs is wanted: each downstream session
		// has its own level, and the proxy filters for it. It is not worth
		// the start: the wait for the answer gets a slice of the budget,
		// and the lists the rest.
		setCtx, cancel := context.WithTimeout(ctx, setLevelBudget(ctx))
		_, err := i.conn.call(setCtx, "logging/setLevel", json.RawMessage(`{"level":"debug"}`))
		late := setCtx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case err == nil:
		case late:
			i.log.Warn("upstream declares logging but did not answer logging/setLevel debug in time; starting without it, it sends what it sends", "server", i.server)
		default:
			i.log.Warn("upstream declares logging but refused logging/setLevel debug; it sends what it sends", "server", i.server, "err", err)
		}
	}
	return nil
}

// maxSetLevelWait bounds the wait for the answer to logging/setLevel at start.
const maxSetLevelWait = 5 * time.Second

// setLevelBudget is how long logging/setLevel may take at start: at most
// maxSetLevelWait and a quarter of what is left of ctx, which the lists need.
func setLevelBudget(ctx context.Context) time.Duration {
	wait := maxSetLevelWait
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)/4)
	}
	return wait
}

// explain turns a bare context error into one that says what was waited for.
func (i *Instance) explain(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		check := "check that the command starts an MCP server on stdio"
		if _, stdio := i.conn.(*stdioConn); !stdio {
			check = "check that url is the server's MCP endpoint and that it answers initialize"
		}
		return fmt.Errorf("no answer before connect_timeout; %s, or raise connect_timeout: %w", check, err)
	}
	return err
}

// withholdsAll reports whether meta is an object with members, every one
// of which withhold reports: then _meta goes without a copy of it being
// made (a client asking for progress sends its progressToken alone).
func withholdsAll(meta []byte, withhold func(key []byte) bool) bool {
	o := rawjson.NewObject(meta)
	members := 0
	for o.Next() {
		if !withhold(o.Name()) {
			return false
		}
		members++
	}
	return members > 0 && o.Err() == nil
}

// Call is one tools/call to forward.
type Call struct {
	Name string // the upstream's original tool name
	// Params are the caller's tools/call params (raw; nil: none). They go
	// upstream as the caller sent them, every member the aggregator does
	// not know included, edited where they stand: name set to Name,
	// arguments to Arguments, _meta without the keys Withhold reports (and
	// left out when that empties it), a null _meta or task left out. A
	// task member asks the upstream to run the call as a task and answer
	// with a CreateTaskResult.
	Params json.RawMessage
	// Arguments are the tool's arguments, forwarded byte for byte; nil
	// sends none.
	Arguments json.RawMessage
	// Withhold reports the keys of the caller's _meta that stay with the
	// caller (given the key unescaped, which it must not keep); nil: every
	// key goes.
	Withhold func(key []byte) bool
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
	// KeepProgress keeps the call's progress token registered past its
	// result (a CreateTaskResult), as Request.KeepProgress does.
	KeepProgress func(result json.RawMessage, release func()) bool
	// OnServerRequest answers the upstream's requests that belong to this
	// call, as Request.OnServerRequest does.
	OnServerRequest ServerRequestHandler
	// Principal is who the call is made for, as Request.Principal.
	Principal identity.Principal
}

// CallTool forwards a call and returns the upstream's result as raw JSON.
// An upstream JSON-RPC error is returned as *RPCError, intact. ctx bounds
// the whole call, the write of the request included: an upstream that does
// not read cannot hold the caller past its deadline. A response over
// Options.MaxMessage fails the call at once (the error wraps
// *jsonrpc.TooLongError).
func (i *Instance) CallTool(ctx context.Context, call Call) (json.RawMessage, error) {
	r, err := call.Request()
	if err != nil {
		return nil, err
	}
	return i.Do(ctx, r)
}

// Request is the tools/call request of call, as Do sends it: the caller's
// params edited where they stand (see Call.Params), every other byte as
// the caller sent it.
func (call Call) Request() (Request, error) {
	params, err := encodeCallParams(call)
	if err != nil {
		return Request{}, err
	}
	return Request{Method: "tools/call", Params: params, ProgressToken: call.ProgressToken, OnProgress: call.OnProgress,
		KeepProgress: call.KeepProgress, OnServerRequest: call.OnServerRequest, Principal: call.Principal}, nil
}

// encodeCallParams edits the caller's params into the params of call's
// request (see Call.Params) in one pass over them, which also validates
// them: the members to change are found, then written with the rest
// copied around them. Nothing the caller sent is encoded again.
func encodeCallParams(call Call) (json.RawMessage, error) {
	params := call.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	// A name that fits is encoded on the stack: it is copied into the
	// params below.
	var nameBuf [64]byte
	name := rawjson.AppendString(nameBuf[:0], call.Name)
	// The members changed, kept in arrays on this stack (with the name
	// they may hold) by index: a slice appended to could grow onto the
	// heap and take the name with it. A member repeated is changed at each
	// place; params that repeat these few members more than maxCallEdits
	// times in all are refused.
	var changes [maxCallEdits]rawjson.Change
	var adds [2]rawjson.Addition
	edits, added := 0, 0
	hasName, hasArgs, count := false, false, 0
	obj := rawjson.NewObject(params)
	for obj.Next() {
		count++
		var value []byte
		switch string(obj.Name()) {
		case "name":
			hasName, value = true, name
		case "arguments":
			hasArgs, value = true, call.Arguments
		case "_meta":
			meta := obj.Value()
			switch {
			case string(meta) == "null":
			case call.Withhold == nil:
				continue
			case withholdsAll(meta, call.Withhold):
				value = nil // _meta of withheld keys alone goes
			default:
				// WithoutFunc returns meta itself when it withholds nothing,
				// and a shorter object when it does.
				kept := rawjson.WithoutFunc(meta, call.Withhold)
				if len(kept) == len(meta) {
					continue
				}
				value = kept
			}
		case "task":
			if string(obj.Value()) != "null" {
				continue
			}
		default:
			continue
		}
		if edits == len(changes) {
			return nil, fmt.Errorf("tools/call params: name, arguments, _meta and task appear more than %d times in all; send each once", maxCallEdits)
		}
		start, end := obj.MemberSpan()
		valueStart, valueEnd := obj.ValueSpan()
		changes[edits] = rawjson.Change{Start: start, End: end, ValueStart: valueStart, ValueEnd: valueEnd, Value: value}
		edits++
	}
	if err := obj.Err(); err != nil {
		return nil, fmt.Errorf("tools/call params: %w", err)
	}
	// What the params lack is added before their own members.
	if !hasName {
		adds[added] = rawjson.Addition{Name: "name", Value: name}
		added++
	}
	if !hasArgs && call.Arguments != nil {
		adds[added] = rawjson.Addition{Name: "arguments", Value: call.Arguments}
		added++
	}
	if added == 0 && unchanged(params, changes[:edits]) {
		// The params go up as they came (a tool exported under its own
		// name): no copy to make.
		return params, nil
	}
	return rawjson.Rewrite(params, count, adds[:added], changes[:edits]), nil
}

// unchanged reports whether changes leave obj as it is: each writes the
// value that stands where it goes.
func unchanged(obj []byte, changes []rawjson.Change) bool {
	for _, c := range changes {
		if c.Value == nil || !bytes.Equal(obj[c.ValueStart:c.ValueEnd], c.Value) {
			return false
		}
	}
	return true
}

// maxCallEdits bounds the members of a tools/call's params that
// encodeCallParams changes: name, arguments, _meta and task, repeats
// included.
const maxCallEdits = 8

// retoken replaces progressToken in a progress notification's params,
// leaving every other byte as it was.
func retoken(params json.RawMessage, token json.RawMessage) json.RawMessage {
	out, ok := rawjson.Set(params, "progressToken", func([]byte) []byte { return token })
	if !ok {
		return params
	}
	return out
}

// notified handles a notification of the upstream. It runs on the
// connection's reader, so nothing here may block: progress is handed to a
// non-blocking callback, list changes are coalesced onto a goroutine, and
// OnNotification must not block either.
func (i *Instance) notified(n Notification) {
	flight := n.flight
	n.flight = 0 // the instance's own: not handed on
	switch n.Method {
	case "notifications/progress":
		key, ok := progressKeyOf(rawjson.Member(n.Params, "progressToken"))
		if !ok {
			return
		}
		i.progMu.Lock()
		sink := i.progress[key]
		i.progMu.Unlock()
		if sink != nil {
			sink.deliver(n.Params)
		}
	case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
		kind := strings.TrimSuffix(strings.TrimPrefix(n.Method, "notifications/"), "/list_changed")
		if c := i.listChanged[kind]; c != nil {
			c.trigger()
		}
	case "notifications/cancelled":
		i.withdrawn(n.Params)
	case "notifications/subscriptions/acknowledged":
		i.listenAcknowledged(n.Params)
	case "notifications/message":
		if !i.requestLog(flight, n.Params) && i.onNotification != nil {
			i.onNotification(i, n)
		}
	default:
		if i.onNotification != nil {
			i.onNotification(i, n)
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

// Capabilities are what the upstream declared in its initialize result.
func (i *Instance) Capabilities() Capabilities { return i.caps }

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

// scrubOfSaid is what removes from what srv says (a stderr line, an error
// body) the secrets of srv and those of every server (secrets, which may be
// nil), for a text that is cut short after.
func scrubOfSaid(srv *config.Server, secrets *redact.Set) func(string) string {
	own := scrubber(srv)
	return func(line string) string { return secrets.String(own(line)) }
}
