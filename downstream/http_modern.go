package downstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
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
	if e := checkLeaseHeader(p.r, msg.Params); e != nil {
		t.refuse(p.w, p.r, e.withID(msg.ID))
		return
	}
	if t.Draining() && !namesLease(msg.Params) {
		// Stateless here: another replica serves it as well. A request
		// naming a lease is served, as the lease may live here.
		t.refuseDraining(p, "requests without a lease")
		return
	}
	t.serveRequest(p, &Request{Msg: msg, Protocol: metaVersion(msg.Params), ClientCapabilities: metaCapabilities(msg.Params)}, nil, nil)
}

// checkModern checks a sessionless request's headers against its body
// (SEP-2243): the protocol version in both, supported; Mcp-Method equal to
// the method; Mcp-Name equal to the name or URI the method acts on.
func checkModern(r *http.Request, msg *jsonrpc.Message) *httpError {
	header, meta := r.Header.Get(headerProtocol), metaVersion(msg.Params)
	mismatch := func(format string, args ...any) *httpError {
		return refusal(http.StatusBadRequest, codeHeaderMismatch, format, args...)
	}
	switch {
	case r.Header.Get(headerLastEventID) != "":
		return mismatch("Last-Event-ID is not supported from protocol 2026-07-28 on: streams cannot be resumed; send the request again with a new id")
	case header != "" && !Supported(header):
		return unsupportedVersion(msg.ID, header)
	case header == "":
		return mismatch("the MCP-Protocol-Version header is required and must equal params._meta[%q] (%q)", MetaProtocolVersion, meta)
	case meta == "":
		return mismatch("params._meta[%q] is required and must equal the MCP-Protocol-Version header (%q)", MetaProtocolVersion, header)
	case header != meta:
		return mismatch("the MCP-Protocol-Version header %q does not match params._meta[%q] %q", header, MetaProtocolVersion, meta)
	case !Supported(meta):
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
	case !ok:
		return mismatch("the Mcp-Name header %q is not valid base64 inside =?base64?...?=", got)
	case decoded != want:
		return mismatch("the Mcp-Name header %q does not match params.%s %q", got, field, want)
	}
	return nil
}

// nameField is the params member a method mirrors in Mcp-Name, or "".
func nameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return "uri"
	}
	return ""
}

// unsupportedVersion refuses a protocol version, listing those served.
func unsupportedVersion(id json.RawMessage, version string) *httpError {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{Versions, version})
	return &httpError{status: http.StatusBadRequest, id: id, err: &jsonrpc.Error{
		Code:    codeUnsupportedVersion,
		Message: fmt.Sprintf("protocol version %q is not supported: use one of %s", version, strings.Join(Versions, ", ")),
		Data:    data,
	}}
}
