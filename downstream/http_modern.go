package downstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// Error codes protocol 2026-07-28 defines for the transport.
const (
	codeHeaderMismatch     = mcp.HEADER_MISMATCH
	codeMissingCapability  = mcp.MISSING_REQUIRED_CLIENT_CAPABILITY
	codeUnsupportedVersion = mcp.UNSUPPORTED_PROTOCOL_VERSION
)

// postModern serves a sessionless (2026-07-28) message. Its headers mirror
// its body so that intermediaries can route on them; a request whose
// headers and body disagree is refused before it reaches the Handler.
// Mcp-Session-Id is ignored.
func (t *HTTP) postModern(p *post) {
	msg := p.msg
	switch {
	case msg.IsResponse():
		t.refuse(p.w, p.r, refusal(http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"protocol %s has no client responses: server requests are input_required results", p.r.Header.Get(headerProtocol)))
		return
	case msg.IsNotification():
		// Closing a request's stream is what cancels it in this generation,
		// so notifications/cancelled has nothing to act on.
		if msg.Method != "notifications/cancelled" {
			t.h.Notified(t.ctx, nil, msg)
		}
		p.w.WriteHeader(http.StatusAccepted)
		return
	}
	if e := checkModern(p.r, msg); e != nil {
		t.refuse(p.w, p.r, e.withID(msg.ID))
		return
	}
	meta := readMeta(msg.Params)
	if err := checkModernRequest(msg, meta); err != nil {
		status := http.StatusBadRequest
		if err.Code == jsonrpc.CodeMethodNotFound {
			status = http.StatusNotFound
		}
		t.refuse(p.w, p.r, (&httpError{status: status, err: err}).withID(msg.ID))
		return
	}
	if e := checkLeaseHeader(p.r, msg.Params); e != nil {
		t.refuse(p.w, p.r, e.withID(msg.ID))
		return
	}
	if t.Draining() && !t.leaseHere(p.r, msg.Params) {
		// Stateless here, or a lease this replica does not hold: another
		// replica serves it as well, and would start that lease there. A
		// request naming a lease held here is served, as its state is here.
		t.refuseDraining(p, "requests without a lease held here")
		return
	}
	p.req = Request{Msg: msg, Protocol: meta.version, ClientCapabilities: meta.capabilities(), ParamHeader: headerLookup(p.r.Header)}
	t.serveRequest(p, &p.req, nil, nil)
}

// checkModern checks a sessionless request's headers against its body
// (SEP-2243): the protocol version in both, supported; Mcp-Method equal to
// the method; Mcp-Name equal to the name or URI the method acts on.
func checkModern(r *http.Request, msg *jsonrpc.Message) *httpError {
	header, meta := r.Header.Get(headerProtocol), metaVersion(msg.Params)
	mismatch := func(format string, args ...any) *httpError {
		return refusal(http.StatusBadRequest, codeHeaderMismatch, format, args...)
	}
	// Last-Event-ID is ignored: streams of this generation cannot be
	// resumed, and a request that carries one is served as a new one.
	switch {
	case header != "" && !protocol.Supported(header):
		return unsupportedVersion(msg.ID, header)
	case header == "":
		return mismatch("the MCP-Protocol-Version header is required and must equal params._meta[%q] (%q)", protocol.MetaProtocolVersion, meta)
	case meta == "":
		// A required member of _meta is missing: the request is malformed.
		return refusal(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			"params._meta[%q] is required and must equal the MCP-Protocol-Version header (%q)", protocol.MetaProtocolVersion, header)
	case header != meta:
		return mismatch("the MCP-Protocol-Version header %q does not match params._meta[%q] %q", header, protocol.MetaProtocolVersion, meta)
	case !protocol.Supported(meta):
		return unsupportedVersion(msg.ID, meta)
	}
	switch got := r.Header.Get(headerMethod); {
	case got == "":
		return mismatch("the Mcp-Method header is required and must equal the method %q", msg.Method)
	case got != msg.Method:
		return mismatch("the Mcp-Method header %q does not match the method %q", got, msg.Method)
	}
	field := nameField(msg.Method)
	if field == "" {
		return nil
	}
	// Exact keys, as the dispatcher reads them: a body must not name one
	// tool to the router and another to the server.
	want, ok := stringMember(members(msg.Params), field)
	if !ok {
		return refusal(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "%s needs params.%s, a string", msg.Method, field)
	}
	got := r.Header.Get(headerName)
	if got == "" {
		return mismatch("the Mcp-Name header is required for %s and must equal params.%s", msg.Method, field)
	}
	decoded, ok := mcp.DecodeHeaderValue(got) // =?base64?...?= carries what a header cannot
	switch {
	case !headerSafe(got):
		return mismatch("the Mcp-Name header has characters a header value cannot carry: send a name outside visible ASCII as =?base64?...?= of its UTF-8")
	case !ok:
		return mismatch("the Mcp-Name header %q is not valid base64 inside =?base64?...?=", got)
	case decoded != want:
		return mismatch("the Mcp-Name header %q does not match params.%s %q", got, field, want)
	}
	return nil
}

// headerSafe reports whether v has only what a header value may carry
// plain: visible ASCII, space and tab.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return false
		}
	}
	return true
}

// nameField is the params member a method mirrors in Mcp-Name, or "".
func nameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId" // the tasks extension routes by task
	}
	return ""
}

// unsupportedVersion refuses a protocol version, listing those served.
func unsupportedVersion(id json.RawMessage, version string) *httpError {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{protocol.Versions, version})
	return &httpError{status: http.StatusBadRequest, id: id, err: &jsonrpc.Error{
		Code:    codeUnsupportedVersion,
		Message: fmt.Sprintf("protocol version %q is not supported: use one of %s", version, strings.Join(protocol.Versions, ", ")),
		Data:    data,
	}}
}

// modernMethods are the requests protocol 2026-07-28 defines for a client
// to send, and those of its tasks extension (tasks/get, tasks/update,
// tasks/cancel). The session generation's others (initialize, ping,
// logging/setLevel, resources/subscribe and unsubscribe, tasks/list,
// tasks/result) have no meaning without a session and are not served in
// this generation.
var modernMethods = map[string]bool{
	"server/discover": true, "subscriptions/listen": true, "completion/complete": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"tasks/get": true, "tasks/update": true, "tasks/cancel": true,
}

// modernInstead says what a request of the session generation becomes in
// protocol 2026-07-28.
var modernInstead = map[string]string{
	"initialize":            "open a session with initialize without the 2026-07-28 MCP-Protocol-Version header and _meta, or send requests directly (server/discover lists what is served)",
	"ping":                  "send server/discover to check the server is there",
	"logging/setLevel":      "name the level in each request's _meta[\"" + MetaLogLevel + "\"]",
	"resources/subscribe":   "list the URI in params.notifications.resourceSubscriptions of a subscriptions/listen request",
	"resources/unsubscribe": "close the subscriptions/listen stream that names the URI",
	"tasks/result":          "poll tasks/get (tasks extension): a task that ended carries its result or error",
	"tasks/list":            "keep the taskId of each task result (tasks extension): there is no list of tasks",
}

// checkModernRequest checks what a sessionless (2026-07-28) request must
// carry besides its version, over every transport: a method of the
// generation (else -32601), and the client capabilities in _meta, an
// object, {} when it declares none (else -32602). meta is the request's
// _meta (readMeta).
func checkModernRequest(msg *jsonrpc.Message, meta requestMeta) *jsonrpc.Error {
	if !modernMethods[msg.Method] {
		if instead, ok := modernInstead[msg.Method]; ok {
			return jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s is not part of protocol 2026-07-28: %s", clip(msg.Method), instead)
		}
		return jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s is not part of protocol 2026-07-28", clip(msg.Method))
	}
	if len(meta.caps) == 0 || meta.caps[0] != '{' {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"params._meta[%q] is required: an object of the capabilities the client has for this request ({} when none)", protocol.MetaClientCapabilities)
	}
	return nil
}

// headerLookup looks a header up in h, telling an empty value from none.
func headerLookup(h http.Header) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v := h.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
}
