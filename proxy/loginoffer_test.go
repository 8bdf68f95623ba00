package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

func TestDeclaresURLElicitation(t *testing.T) {
	for caps, want := range map[string]bool{
		`{"elicitation":{"url":{}}}`:           true,
		`{"elicitation":{"form":{},"url":{}}}`: true,
		`{"elicitation":{}}`:                   false, // form only
		`{"elicitation":{"form":{}}}`:          false,
		`{"sampling":{}}`:                      false,
		`{"elicitation":{"url":null}}`:         false,
		`not json`:                             false,
		``:                                     false,
	} {
		assert.Equal(t, want, declaresURLElicitation(json.RawMessage(caps)), caps)
	}
}

func TestLoginOffer(t *testing.T) {
	offered := 0
	p := New(Options{OfferLogin: func(_ context.Context, server string) (string, string, error) {
		offered++
		return "https://auth.example/authorize?state=s&x=<y>", "el-1", nil
	}})
	needsLogin := fmt.Errorf("server %q: %w", "linear", &oauth.LoginRequiredError{Server: "linear", Reason: "not logged in"})
	urlClient := &downstream.Request{ClientCapabilities: json.RawMessage(`{"elicitation":{"url":{}}}`)}
	formClient := &downstream.Request{ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)}

	assert.Nil(t, p.loginOffer(context.Background(), formClient, "linear", needsLogin), "a client without URL mode gets the plain error")
	assert.Nil(t, p.loginOffer(context.Background(), urlClient, "linear", errors.New("connection refused")), "only a missing login is offered")
	assert.Nil(t, p.loginOffer(context.Background(), nil, "linear", needsLogin))
	assert.Equal(t, 0, offered)

	e := p.loginOffer(context.Background(), urlClient, "linear", needsLogin)
	require.NotNil(t, e)
	assert.Equal(t, -32042, e.Code)
	assert.JSONEq(t, `{"elicitations":[{"mode":"url","elicitationId":"el-1","url":"https://auth.example/authorize?state=s&x=<y>",
		"message":"MCP server \"linear\" needs you to log in. Open the link, approve the access, then try again."}]}`, string(e.Data))

	failing := New(Options{OfferLogin: func(context.Context, string) (string, string, error) { return "", "", errors.New("no network") }})
	assert.Nil(t, failing.loginOffer(context.Background(), urlClient, "linear", needsLogin), "an offer that cannot be made leaves the plain error")
}
