package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Protocol 2026-07-28 is sessionless: there is no initialize handshake. A
// client names its protocol version, identity and capabilities in the _meta
// of every request, learns the server's capabilities with server/discover,
// and over HTTP mirrors the method (and the tool, prompt or resource it
// acts on) in the Mcp-Method and Mcp-Name headers. A server that needs
// input in the middle of a request does not send requests of its own: it
// answers input_required (see inputrequired.go).

// envelope is what every request of the aggregator to a sessionless
// upstream carries in its _meta, each member already encoded, in a fixed
// order.
type envelope []envelopeMember

type envelopeMember struct {
	key   string
	value json.RawMessage
}

func newEnvelope(version, name, ver string, caps json.RawMessage) envelope {
	info, _ := rawjson.Marshal(map[string]string{"name": name, "version": ver})
	v, _ := rawjson.Marshal(version)
	return envelope{{protocol.MetaProtocolVersion, v}, {protocol.MetaClientInfo, info}, {protocol.MetaClientCapabilities, caps}}
}

// TasksExtension is the 2026-07-28 tasks extension's identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

type tasksExtensionKey struct{}

// WithTasksExtension marks ctx for a request made for a client that
// declared the tasks extension on it: to a 2026-07-28 upstream, the
// request declares the extension too (in its _meta client capabilities),
// so that the upstream may answer it with a task. Unmarked, the upstream
// is not told of it, and keeps to the core protocol.
func WithTasksExtension(ctx context.Context) context.Context {
	return context.WithValue(ctx, tasksExtensionKey{}, true)
}

// forRequest is e for a request made under ctx: with the tasks extension
// among the client capabilities when ctx is marked (WithTasksExtension).
func (e envelope) forRequest(ctx context.Context) envelope {
	if marked, _ := ctx.Value(tasksExtensionKey{}).(bool); !marked {
		return e
	}
	out := slices.Clone(e)
	for i, m := range out {
		if m.key != protocol.MetaClientCapabilities {
			continue
		}
		caps, ok := rawjson.Set(m.value, "extensions", func(ext []byte) []byte {
			if len(ext) == 0 || ext[0] != '{' {
				ext = []byte(`{}`)
			}
			if next, ok := rawjson.Set(ext, TasksExtension, func([]byte) []byte { return []byte(`{}`) }); ok {
				return next
			}
			return ext
		})
		if ok {
			out[i].value = caps
		}
	}
	return out
}

// wrap returns params with the envelope's members set in its _meta; the
// caller's own _meta members (a progress token) and every other byte stay.
func (e envelope) wrap(params json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	out, ok := rawjson.Set(params, "_meta", func(meta []byte) []byte {
		if meta == nil || len(meta) == 0 || meta[0] != '{' {
			meta = []byte(`{}`)
		}
		for _, m := range e {
			if next, ok := rawjson.Set(meta, m.key, func([]byte) []byte { return m.value }); ok {
				meta = next
			}
		}
		return meta
	})
	if !ok {
		return nil, fmt.Errorf("params are not a JSON object; protocol 2026-07-28 needs one to carry _meta")
	}
	return out, nil
}

// rawParams encodes what a caller passes as params (nil, raw JSON, or a
// value to encode).
func rawParams(params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	default:
		return rawjson.Marshal(p)
	}
}

// standardHeaders are the Mcp-Method and Mcp-Name headers of a request.
func standardHeaders(version, method string, params json.RawMessage) http.Header {
	h := http.Header{}
	for k, v := range mcp.StandardHeaders(version, mcp.MCPMethod(method), params) {
		h.Set(k, v)
	}
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		// The tasks extension routes by task: Mcp-Name is params.taskId.
		var p struct {
			TaskID string `json:"taskId"`
		}
		if len(h) > 0 && json.Unmarshal(params, &p) == nil && p.TaskID != "" {
			if v, ok := mcp.EncodeHeaderValue(p.TaskID); ok {
				h.Set(mcp.HeaderName, v)
			}
		}
	}
	return h
}

// discover is the sessionless generation's start: server/discover, whose
// result names the versions the upstream speaks and its capabilities.
func (i *Instance) discover(ctx context.Context, srv *config.Server, version, name, ver string, caps json.RawMessage) error {
	env := newEnvelope(version, name, ver, caps)
	switch c := i.conn.(type) {
	case *remoteConn:
		if srv.Transport != config.TransportHTTP {
			return fmt.Errorf("server %q: protocol %s is not spoken over the legacy SSE transport; set transport: streamable_http, or protocol: %s (or auto)", i.server, version, DefaultProtocol)
		}
		c.speakModern(version, env)
	case *stdioConn:
		i.conn = &modernStdio{stdioConn: c, env: env}
	default:
		return fmt.Errorf("server %q: protocol %s is supported over stdio and streamable_http only; set protocol: %s (or auto)", i.server, version, DefaultProtocol)
	}
	raw, err := i.conn.call(ctx, "server/discover", nil)
	if err != nil {
		return fmt.Errorf("server %q: server/discover: %w; if the server does not speak protocol %s, set protocol: %s", i.server, i.explain(ctx, err), version, DefaultProtocol)
	}
	var res struct {
		Supported    []string        `json:"supportedVersions"`
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("server %q: server/discover: malformed result: %v", i.server, err)
	}
	if !slices.Contains(res.Supported, version) {
		return fmt.Errorf("server %q: it does not speak protocol %s (it speaks %s); set protocol to one of those", i.server, version, strings.Join(res.Supported, ", "))
	}
	i.protocol = version
	i.caps = parseCapabilities(res.Capabilities)
	return nil
}

// Per-request log level. A sessionless upstream logs for a request only
// when its _meta names a level (io.modelcontextprotocol/logLevel); the
// aggregator sends the caller's: a 2026-07-28 client's own, an older
// client's session level. The proxy puts it in the request's context.

const metaLogLevel = "io.modelcontextprotocol/logLevel"

// logLevelOf is the level the caller (WithCaller) wants, or "".
func logLevelOf(ctx context.Context) string {
	if c := CallerOf(ctx); c != nil {
		return c.LogLevel()
	}
	return ""
}

// modernParams sets, for a sessionless upstream, the per-request members of
// _meta that depend on the caller (its log level); params stay as they are
// for older upstreams or when there is nothing to set.
func (i *Instance) modernParams(ctx context.Context, params json.RawMessage) json.RawMessage {
	if !protocol.Modern(i.protocol) {
		return params
	}
	level := logLevelOf(ctx)
	if level == "" {
		return params
	}
	raw, _ := rawjson.Marshal(level)
	if out, ok := withMeta(params, map[string]json.RawMessage{metaLogLevel: raw}); ok {
		return out
	}
	return params
}

// List changes and resource subscriptions. A sessionless upstream sends
// notifications outside any request only on a subscriptions/listen stream,
// whose filter names what it is for: the lists the upstream says change
// (listChanged), and the resources subscribed to (resources/subscribe,
// which that generation does not have, becomes a URI in the filter). The
// instance keeps one stream open as long as the connection lives. When the
// filter changes, the stream is replaced at once; when it ends (the
// upstream closed it, or it broke), it is opened again after a pause, and
// since changes may have gone unseen in between, the lists are read again
// once the new stream is acknowledged.

// Pauses between subscriptions/listen attempts, and bounds.
const (
	listenPauseMin = 500 * time.Millisecond
	listenPauseMax = 30 * time.Second
	// listenHealthy is how long a stream must have lasted for the pause
	// to start over from listenPauseMin.
	listenHealthy = time.Minute
	// maxResourceSubscriptions bounds the URIs one instance subscribes to.
	maxResourceSubscriptions = 1024
)

// listenState is an instance's subscriptions/listen stream.
type listenState struct {
	mu          sync.Mutex
	uris        map[string]bool // subscribed resources
	restart     chan struct{}   // the filter changed; buffered 1
	acked       chan struct{}   // closed and replaced at each acknowledgement
	sent        map[string]bool // the resources the stream being opened asks for
	ackedURIs   map[string]bool // the resources the last acknowledgement agreed to
	ackedSent   map[string]bool // the resources its stream asked for
	reread      bool            // the next acknowledgement follows a stream that ended: read the lists
	unsupported error           // set when the upstream has no subscriptions/listen
}

// init makes the channels; called with mu held.
func (l *listenState) init() {
	if l.restart == nil {
		l.restart = make(chan struct{}, 1)
		l.acked = make(chan struct{})
	}
}

func (l *listenState) restartCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	return l.restart
}

// listenFilter is the stream's params for what the instance follows now;
// nil when nothing.
func (i *Instance) listenFilter() json.RawMessage {
	params, _ := i.listenParams()
	return params
}

// listenParams is listenFilter, and the resources it names.
func (i *Instance) listenParams() (json.RawMessage, map[string]bool) {
	var kinds []string
	if i.caps.ToolsListChanged {
		kinds = append(kinds, `"toolsListChanged":true`)
	}
	if i.caps.PromptsListChanged {
		kinds = append(kinds, `"promptsListChanged":true`)
	}
	if i.caps.ResourcesListChanged {
		kinds = append(kinds, `"resourcesListChanged":true`)
	}
	i.listen.mu.Lock()
	sent := maps.Clone(i.listen.uris)
	i.listen.mu.Unlock()
	if len(sent) > 0 {
		list, _ := rawjson.Marshal(slices.Sorted(maps.Keys(sent)))
		kinds = append(kinds, `"resourceSubscriptions":`+string(list))
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	return json.RawMessage(`{"notifications":{` + strings.Join(kinds, ",") + `}}`), sent
}

// follow keeps a subscriptions/listen stream open to a sessionless
// upstream while the connection lives.
func (i *Instance) follow() {
	if !protocol.Modern(i.protocol) {
		return
	}
	go i.listenLoop()
}

func (i *Instance) listenLoop() {
	pause := listenPauseMin
	restart := i.listen.restartCh()
	for {
		params, sent := i.listenParams()
		i.listen.mu.Lock()
		i.listen.sent = sent
		i.listen.mu.Unlock()
		if params == nil {
			select {
			case <-restart: // something to follow now
				continue
			case <-i.conn.done():
				return
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		replaced := make(chan bool, 1)
		go func() {
			select {
			case <-restart:
				replaced <- true
				cancel()
			case <-ctx.Done():
				replaced <- false
			}
		}()
		start := time.Now()
		_, err := i.conn.call(ctx, "subscriptions/listen", params)
		cancel()
		if <-replaced {
			continue // the filter changed: the new stream at once
		}
		select {
		case <-i.conn.done():
			return
		default:
		}
		if time.Since(start) >= listenHealthy {
			pause = listenPauseMin
		}
		var rpcErr *RPCError
		if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
			i.log.Warn("the upstream announces list changes or resource subscriptions but has no subscriptions/listen; its lists are read at start and on reload only",
				"server", i.server, "err", err)
			i.listen.mu.Lock()
			i.listen.unsupported = fmt.Errorf("server %q has no subscriptions/listen: %w", i.server, err)
			i.listen.init()
			close(i.listen.acked) // wakes the subscribers waiting, to fail
			i.listen.acked = make(chan struct{})
			i.listen.mu.Unlock()
			return
		}
		if err != nil {
			i.log.Warn("the upstream's subscriptions/listen stream failed; list changes are not seen until it is open again",
				"server", i.server, "retry_in", pause, "err", err)
		} else {
			i.log.Debug("the upstream ended its subscriptions/listen stream; opening it again", "server", i.server)
		}
		i.listen.mu.Lock()
		i.listen.reread = true
		i.listen.mu.Unlock()
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-restart:
			t.Stop()
		case <-i.conn.done():
			t.Stop()
			return
		}
		pause = min(pause*2, listenPauseMax)
	}
}

// listenAcknowledged handles notifications/subscriptions/acknowledged: it
// records what the upstream agreed to, wakes the subscriptions waiting for
// it, and, after a stream that ended, reads the lists again.
func (i *Instance) listenAcknowledged(params json.RawMessage) {
	var ack struct {
		Notifications struct {
			Resources []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	_ = json.Unmarshal(params, &ack)
	i.listen.mu.Lock()
	i.listen.init()
	i.listen.ackedSent = i.listen.sent
	i.listen.ackedURIs = make(map[string]bool, len(ack.Notifications.Resources))
	for _, uri := range ack.Notifications.Resources {
		i.listen.ackedURIs[uri] = true
	}
	close(i.listen.acked)
	i.listen.acked = make(chan struct{})
	reread := i.listen.reread
	i.listen.reread = false
	i.listen.mu.Unlock()
	if !reread {
		return
	}
	for _, c := range i.listChanged {
		c.trigger()
	}
}

// subscription serves resources/subscribe and resources/unsubscribe for a
// sessionless upstream: the URI joins or leaves the stream's filter, and a
// subscription is answered once the upstream acknowledged a stream with it.
func (i *Instance) subscription(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, &RPCError{Code: jsonrpc.CodeInvalidParams, Message: method + " needs params.uri"}
	}
	if !i.caps.ResourcesSubscribe {
		return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("server %q does not offer resource subscriptions", i.server)}
	}
	l := &i.listen
	l.mu.Lock()
	l.init()
	if l.unsupported != nil {
		err := l.unsupported
		l.mu.Unlock()
		return nil, err
	}
	subscribe := method == "resources/subscribe"
	if subscribe == l.uris[p.URI] {
		l.mu.Unlock()
		return json.RawMessage(`{}`), nil // nothing changes
	}
	if subscribe {
		if len(l.uris) >= maxResourceSubscriptions {
			l.mu.Unlock()
			return nil, &RPCError{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("server %q: already %d resources subscribed to through this instance; unsubscribe from some first", i.server, maxResourceSubscriptions)}
		}
		if l.uris == nil {
			l.uris = map[string]bool{}
		}
		l.uris[p.URI] = true
	} else {
		delete(l.uris, p.URI)
	}
	select {
	case l.restart <- struct{}{}:
	default:
	}
	acked := l.acked
	l.mu.Unlock()
	if !subscribe {
		return json.RawMessage(`{}`), nil
	}
	for {
		select {
		case <-acked:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		l.mu.Lock()
		switch {
		case l.unsupported != nil:
			err := l.unsupported
			delete(l.uris, p.URI)
			l.mu.Unlock()
			return nil, err
		case l.ackedURIs[p.URI]:
			l.mu.Unlock()
			return json.RawMessage(`{}`), nil
		case !l.uris[p.URI]:
			l.mu.Unlock() // unsubscribed meanwhile
			return json.RawMessage(`{}`), nil
		case l.ackedSent[p.URI]:
			// Asked for and left out: the upstream does not agree.
			delete(l.uris, p.URI)
			l.mu.Unlock()
			return nil, &RPCError{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("server %q did not agree to send updates of resource %q (its subscriptions/listen acknowledgement left it out)", i.server, p.URI)}
		}
		acked = l.acked // the acknowledgement of an earlier filter: the next one
		l.mu.Unlock()
	}
}

// modernStdio speaks protocol 2026-07-28 over a stdio connection: every
// request carries the envelope in its _meta (there is no initialize to say
// it once), everything else is the stdio connection's.
type modernStdio struct {
	*stdioConn
	env envelope
}

func (c *modernStdio) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	raw, err := rawParams(params)
	if err == nil {
		raw, err = c.env.forRequest(ctx).wrap(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: %s: %w", c.server, method, err)
	}
	return c.stdioConn.call(ctx, method, raw)
}
