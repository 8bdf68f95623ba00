package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// surfaceServer is the demo server "surface": a hand-written server that
// offers the MCP surface beyond tools (resources, resource templates,
// prompts, completions, logging, subscriptions) and sends its client what
// an upstream may send: requests of its own during a tool call
// (sampling/createMessage, elicitation/create, roots/list), notifications
// of every kind, progress on any request.
//
// Its lists are paginated (surfacePageSize items a page) and carry numbers
// no float64 holds, so that a client that decodes them shows. Arguments:
//   - fail-lists: resources/list, resources/templates/list and prompts/list
//     answer with an error;
//   - no-logging: the server does not declare logging;
//   - reject-level: logging/setLevel answers with an error;
//   - extensions=<JSON object>: the server declares it as its extensions
//     capability;
//   - echo-client: the server has one more tool, client, that answers
//     {"capabilities": ...}, the capabilities its initialize request
//     declared (null before it), and {"pid": ...}, its process id.
//
// Tools:
//   - ask {method, params}: sends the client the request method
//     (sampling/createMessage if empty) with params (a small sampling
//     request if absent), waits for its answer and returns it, raw, as
//     structuredContent.response: {"result": ...} or {"error": ...}.
//   - notify {notifications: [{method, params}], repeat}: sends each
//     notification repeat times (once by default), in order, then answers.
//   - wait {ms}: answers after ms milliseconds; cancelled, it never answers.
//     It says on stderr when it starts waiting, and the reason of a
//     cancellation.
//   - levels: answers {"levels": [...]}, the level of every
//     logging/setLevel so far, in order.
//   - meta: answers {"meta": ...}, the request's params._meta as received
//     (null when it had none): what the client's _meta became on the way.
//
// notifications/roots/list_changed makes it ask the client roots/list.
//
// resources/read sends two progress notifications first when the request
// has a progress token; resources/subscribe sends
// notifications/resources/updated for the URI after its answer. A read of
// demo://cache/SCOPE/TTL/NAME answers with the caching hints of 2026-07-28
// (cacheScope SCOPE, ttlMs TTL) and the text "read N by PID": the Nth read
// of such a URI this process answered, whichever URI it was.
type surfaceServer struct {
	conn        *lineConn
	errOut      io.Writer
	failLists   bool
	noLogging   bool
	rejectLevel bool
	// extensions is the extensions capability it declares; nil: none.
	extensions json.RawMessage
	// echoClient adds the client tool; clientCaps is what it answers.
	echoClient bool
	clientCaps json.RawMessage

	mu      sync.Mutex
	levels  []string
	asked   int
	answers map[string]chan *jsonrpc.Message // the client's answers to ask, by id key
	waiting map[string]context.CancelFunc    // wait calls, by id key
	// rootsAsking: a roots/list is out; rootsAgain: the roots changed
	// again since it went.
	rootsAsking, rootsAgain bool
	cacheReads              int // reads of demo://cache/ URIs answered
	wg                      sync.WaitGroup
}

// surfacePageSize is how many items one page of the surface server's lists holds.
const surfacePageSize = 2

// surfaceBig is an integer beyond float64's exact range.
const surfaceBig = "12345678901234567890"

func runSurface(ctx context.Context, args []string, in io.Reader, out io.Writer, errOut io.Writer) error {
	s := &surfaceServer{conn: &lineConn{out: out}, errOut: errOut, answers: map[string]chan *jsonrpc.Message{}, waiting: map[string]context.CancelFunc{}}
	for _, arg := range args {
		switch arg {
		case "fail-lists":
			s.failLists = true
		case "no-logging":
			s.noLogging = true
		case "reject-level":
			s.rejectLevel = true
		case "echo-client":
			s.echoClient = true
		default:
			ext, ok := strings.CutPrefix(arg, "extensions=")
			if !ok || !json.Valid([]byte(ext)) {
				return fmt.Errorf("demo: surface: unknown argument %q (fail-lists, no-logging, reject-level, echo-client, extensions=<JSON object>)", arg)
			}
			s.extensions = json.RawMessage(ext)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	return serveLines(ctx, in, func(line []byte) error { return s.handle(ctx, line) })
}

func (s *surfaceServer) handle(ctx context.Context, line []byte) error {
	m, ok, err := decodeLine(s.conn, line)
	if !ok || err != nil {
		return err
	}
	switch {
	case m.IsResponse():
		s.mu.Lock()
		ch := s.answers[jsonrpc.IDKey(m.ID)]
		delete(s.answers, jsonrpc.IDKey(m.ID))
		s.mu.Unlock()
		if ch != nil {
			ch <- &m.Message
		}
		return nil
	case m.IsNotification():
		if m.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
				Reason    string          `json:"reason"`
			}
			_ = json.Unmarshal(m.Params, &p)
			s.mu.Lock()
			if stop := s.waiting[jsonrpc.IDKey(p.RequestID)]; stop != nil {
				stop()
				fmt.Fprintf(s.errOut, "wait: cancelled, reason %q\n", p.Reason)
			}
			s.mu.Unlock()
		}
		if m.Method == "notifications/roots/list_changed" {
			s.rootsChanged(ctx)
		}
		return nil
	}
	switch m.Method {
	case "initialize":
		return s.conn.respond(m.ID, s.initializeResult(m.Params))
	case "ping", "resources/unsubscribe":
		return s.conn.respond(m.ID, json.RawMessage(`{}`))
	case "logging/setLevel":
		var p struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		s.levels = append(s.levels, p.Level)
		s.mu.Unlock()
		if s.rejectLevel {
			return s.conn.failCode(m.ID, codeInvalidParams, "logging/setLevel is refused by this server")
		}
		return s.conn.respond(m.ID, json.RawMessage(`{}`))
	case "tools/list":
		if s.echoClient {
			return s.conn.respond(m.ID, json.RawMessage(strings.TrimSuffix(surfaceTools, "]}")+","+surfaceClientTool+"]}"))
		}
		return s.conn.respond(m.ID, json.RawMessage(surfaceTools))
	case "tools/call":
		return s.call(ctx, m)
	case "resources/list":
		return s.page(m, "resources", func(n int) string {
			if n == 0 {
				return `{"uri":"demo://r/0","name":"r0","_meta":{"big":` + surfaceBig + `}}`
			}
			return fmt.Sprintf(`{"uri":"demo://r/%d","name":"r%d","mimeType":"text/plain"}`, n, n)
		}, 5)
	case "resources/templates/list":
		return s.page(m, "resourceTemplates", func(n int) string {
			return fmt.Sprintf(`{"uriTemplate":"demo://t/%d/{id}","name":"t%d"}`, n, n)
		}, 3)
	case "prompts/list":
		return s.page(m, "prompts", func(n int) string {
			return fmt.Sprintf(`{"name":"p%d","arguments":[{"name":"a","required":true}],"_meta":{"n":%s%d}}`, n, surfaceBig, n)
		}, 3)
	case "resources/read":
		var p struct {
			URI  string `json:"uri"`
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if token := p.Meta.ProgressToken; len(token) > 0 && string(token) != "null" {
			for i := 1; i <= 2; i++ {
				params := fmt.Sprintf(`{"progressToken":%s,"progress":%d,"total":2,"x":%s}`, token, i, surfaceBig)
				if err := s.conn.send(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(params)}); err != nil {
					return err
				}
			}
		}
		uri, _ := marshal(p.URI)
		if hinted, ok := s.cacheRead(p.URI, uri); ok {
			return s.conn.respond(m.ID, hinted)
		}
		return s.conn.respond(m.ID, json.RawMessage(`{"contents":[{"uri":`+string(uri)+`,"text":"contents","_meta":{"big":`+surfaceBig+`}}]}`))
	case "resources/subscribe":
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if err := s.conn.respond(m.ID, json.RawMessage(`{}`)); err != nil {
			return err
		}
		return s.conn.notify("notifications/resources/updated", map[string]any{"uri": p.URI})
	case "prompts/get":
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		name, _ := marshal("prompt " + p.Name)
		return s.conn.respond(m.ID, json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":`+string(name)+`}}]}`))
	case "completion/complete":
		return s.conn.respond(m.ID, json.RawMessage(`{"completion":{"values":["one","two"],"total":2,"hasMore":false}}`))
	default:
		return s.conn.failCode(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

func (s *surfaceServer) initializeResult(params json.RawMessage) json.RawMessage {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	s.mu.Lock()
	s.clientCaps = p.Capabilities
	s.mu.Unlock()
	if p.ProtocolVersion == "" {
		p.ProtocolVersion = "2025-11-25"
	}
	version, _ := marshal(p.ProtocolVersion)
	logging := `"logging":{},`
	if s.noLogging {
		logging = ""
	}
	if s.extensions != nil {
		logging += `"extensions":` + string(s.extensions) + `,`
	}
	return json.RawMessage(`{"protocolVersion":` + string(version) + `,"capabilities":{"completions":{},` + logging +
		`"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true},` +
		`"x-future":{"big":` + surfaceBig + `}},"serverInfo":{"name":"demo-surface","version":"1.0.0"}}`)
}

// page answers one page of a list of count items, item(n) being the nth.
func (s *surfaceServer) page(m message, member string, item func(n int) string, count int) error {
	if s.failLists {
		return s.conn.failCode(m.ID, jsonrpc.CodeInternalError, m.Method+" fails on this server")
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(m.Params, &p)
	offset := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(p.Cursor, "surface-"))
		if err != nil || n < 0 || n > count {
			return s.conn.failCode(m.ID, codeInvalidParams, "invalid cursor")
		}
		offset = n
	}
	end := min(offset+surfacePageSize, count)
	items := make([]string, 0, end-offset)
	for n := offset; n < end; n++ {
		items = append(items, item(n))
	}
	result := `{"` + member + `":[` + strings.Join(items, ",") + `]`
	if end < count {
		result += `,"nextCursor":"surface-` + strconv.Itoa(end) + `"`
	}
	return s.conn.respond(m.ID, json.RawMessage(result+"}"))
}

const surfaceTools = `{"tools":[` +
	`{"name":"ask","description":"Sends the client a request and returns its answer.","inputSchema":{"type":"object","properties":{"method":{"type":"string"},"params":{"type":"object"}}}},` +
	`{"name":"notify","description":"Sends notifications.","inputSchema":{"type":"object","properties":{"notifications":{"type":"array"},"repeat":{"type":"integer"}}}},` +
	`{"name":"wait","description":"Answers after ms milliseconds.","inputSchema":{"type":"object","properties":{"ms":{"type":"integer"}}}},` +
	`{"name":"levels","description":"Lists the logging levels set.","inputSchema":{"type":"object"}},` +
	`{"name":"meta","description":"Answers with the _meta of its request, as received.","inputSchema":{"type":"object"}}]}`

// surfaceClientTool is the tool echo-client adds.
const surfaceClientTool = `{"name":"client","description":"Answers with the capabilities its client declared.","inputSchema":{"type":"object"}}`

// surfaceSampling is what ask sends when it is given no params.
const surfaceSampling = `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}],"maxTokens":` + surfaceBig + `}`

func (s *surfaceServer) call(ctx context.Context, m message) error {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Method        string          `json:"method"`
			Params        json.RawMessage `json:"params"`
			Notifications []struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"notifications"`
			Repeat int `json:"repeat"`
			MS     int `json:"ms"`
		} `json:"arguments"`
		Meta json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return s.conn.failCode(m.ID, codeInvalidParams, "invalid tools/call params: "+err.Error())
	}
	args := p.Arguments
	switch p.Name {
	case "ask":
		method, params := args.Method, args.Params
		if method == "" {
			method = "sampling/createMessage"
		}
		if len(params) == 0 {
			params = json.RawMessage(surfaceSampling)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ask(ctx, m.ID, method, params)
		}()
		return nil
	case "notify":
		repeat := max(args.Repeat, 1)
		for range repeat {
			for _, n := range args.Notifications {
				if err := s.conn.send(&jsonrpc.Message{Method: n.Method, Params: n.Params}); err != nil {
					return err
				}
			}
		}
		return s.conn.respondValue(m.ID, textResult(fmt.Sprintf("sent %d", repeat*len(args.Notifications))))
	case "wait":
		wctx, stop := context.WithTimeout(ctx, time.Duration(args.MS)*time.Millisecond)
		key := jsonrpc.IDKey(m.ID)
		s.mu.Lock()
		s.waiting[key] = stop
		s.mu.Unlock()
		fmt.Fprintln(s.errOut, "wait: started")
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			<-wctx.Done()
			s.mu.Lock()
			delete(s.waiting, key)
			s.mu.Unlock()
			if errors.Is(wctx.Err(), context.DeadlineExceeded) {
				_ = s.conn.respondValue(m.ID, textResult("waited"))
			}
		}()
		return nil
	case "levels":
		s.mu.Lock()
		levels := append([]string{}, s.levels...)
		s.mu.Unlock()
		return s.conn.respondValue(m.ID, structuredResult(map[string]any{"levels": levels}))
	case "client":
		if !s.echoClient {
			return s.conn.failCode(m.ID, codeInvalidParams, "unknown tool: "+p.Name)
		}
		s.mu.Lock()
		caps := s.clientCaps
		s.mu.Unlock()
		if len(caps) == 0 {
			caps = json.RawMessage(`null`)
		}
		return s.conn.respondValue(m.ID, structuredResult(map[string]any{"capabilities": caps, "pid": os.Getpid()}))
	case "meta":
		meta := p.Meta
		if len(meta) == 0 {
			meta = json.RawMessage(`null`)
		}
		return s.conn.respondValue(m.ID, structuredResult(map[string]any{"meta": meta}))
	default:
		return s.conn.failCode(m.ID, codeInvalidParams, "unknown tool: "+p.Name)
	}
}

// rootsChanged asks the client for its roots, as a server that uses them
// does when told they changed: one roots/list at a time, and once more
// after it when they changed again meanwhile.
func (s *surfaceServer) rootsChanged(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rootsAsking {
		s.rootsAgain = true
		return
	}
	s.rootsAsking = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.mu.Lock()
			s.asked++
			id := json.RawMessage(strconv.Quote("roots-" + strconv.Itoa(s.asked)))
			answer := make(chan *jsonrpc.Message, 1)
			s.answers[jsonrpc.IDKey(id)] = answer
			s.mu.Unlock()
			if s.conn.send(&jsonrpc.Message{ID: id, Method: "roots/list"}) == nil {
				select {
				case <-answer:
				case <-ctx.Done():
				}
			}
			s.mu.Lock()
			if !s.rootsAgain || ctx.Err() != nil {
				s.rootsAsking = false
				s.mu.Unlock()
				return
			}
			s.rootsAgain = false
			s.mu.Unlock()
		}
	}()
}

// ask sends the client a request and answers the tool call id with the
// client's answer.
func (s *surfaceServer) ask(ctx context.Context, callID json.RawMessage, method string, params json.RawMessage) {
	s.mu.Lock()
	s.asked++
	id := json.RawMessage(strconv.Quote("ask-" + strconv.Itoa(s.asked)))
	answer := make(chan *jsonrpc.Message, 1)
	s.answers[jsonrpc.IDKey(id)] = answer
	s.mu.Unlock()
	if err := s.conn.send(&jsonrpc.Message{ID: id, Method: method, Params: params}); err != nil {
		return
	}
	var resp *jsonrpc.Message
	select {
	case resp = <-answer:
	case <-ctx.Done():
		return
	}
	var response []byte
	if resp.Error != nil {
		response = append(resp.Error.Append([]byte(`{"error":`)), '}')
	} else {
		response = append(append([]byte(`{"result":`), resp.Result...), '}')
	}
	result := `{"content":[{"type":"text","text":"answered"}],"structuredContent":{"response":` + string(response) + `}}`
	_ = s.conn.respond(callID, json.RawMessage(result))
}

// cacheRead answers a read of demo://cache/SCOPE/TTL/NAME (quoted: the URI
// as JSON) with the hints the URI names and the number of such reads so
// far; ok is false for any other URI.
func (s *surfaceServer) cacheRead(uri string, quoted []byte) (json.RawMessage, bool) {
	rest, ok := strings.CutPrefix(uri, "demo://cache/")
	if !ok {
		return nil, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 {
		return nil, false
	}
	ttl, err := strconv.Atoi(parts[1])
	if err != nil {
		return nil, false
	}
	scope, _ := marshal(parts[0])
	s.mu.Lock()
	s.cacheReads++
	n := s.cacheReads
	s.mu.Unlock()
	return json.RawMessage(fmt.Sprintf(`{"contents":[{"uri":%s,"text":"read %d by %d"}],"ttlMs":%d,"cacheScope":%s}`, quoted, n, os.Getpid(), ttl, scope)), true
}
