package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

// LoginOffer starts the login of a server that needs one, or finds the one
// already under way, for a person to finish in a browser: it returns the
// authorization URL and an id for the elicitation.
type LoginOffer func(ctx context.Context, server string) (url, elicitationID string, err error)

// codeURLElicitationRequired is MCP's URLElicitationRequiredError
// (2025-11-25): the request can be retried once the user has finished the
// elicitations its data lists.
const codeURLElicitationRequired = -32042

// loginOffer turns a call that failed for want of a login into the spec's
// URL elicitation, when the client declared URL-mode elicitation and the
// aggregator can run the login; nil otherwise.
func (p *Proxy) loginOffer(ctx context.Context, req *downstream.Request, server string, err error) *jsonrpc.Error {
	if p.opts.OfferLogin == nil || !errors.Is(err, oauth.ErrLoginRequired) || !declaresURLElicitation(capabilitiesOf(req)) {
		return nil
	}
	url, id, offerErr := p.opts.OfferLogin(ctx, server)
	if offerErr != nil {
		p.log.Warn("could not offer the client a login", "server", server, "err", offerErr)
		return nil
	}
	message := fmt.Sprintf("MCP server %q needs you to log in. Open the link, approve the access, then try again.", server)
	data, _ := rawjson.Marshal(map[string]any{"elicitations": []any{map[string]string{
		"mode": "url", "elicitationId": id, "url": url, "message": message,
	}}})
	return &jsonrpc.Error{Code: codeURLElicitationRequired, Message: message, Data: data}
}

// capabilitiesOf is what the client of req declared.
func capabilitiesOf(req *downstream.Request) json.RawMessage {
	switch {
	case req == nil:
		return nil
	case req.ClientCapabilities != nil:
		return req.ClientCapabilities
	case req.Session != nil:
		return req.Session.ClientCapabilities()
	}
	return nil
}

// declaresURLElicitation reports whether capabilities hold elicitation.url.
func declaresURLElicitation(capabilities json.RawMessage) bool {
	var caps struct {
		Elicitation json.RawMessage `json:"elicitation"`
	}
	if json.Unmarshal(capabilities, &caps) != nil {
		return false
	}
	return declares(caps.Elicitation, "url")
}
