package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/oauth2"
)

// maxRegistration bounds a registration endpoint's answer.
const maxRegistration = 64 << 10

// registration is a client registered by RFC 7591 dynamic client
// registration: what the flow needs of the answer.
type registration struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
}

// authStyle is how the registered client authenticates at the token
// endpoint; a client with no secret names itself in the form.
func (r *registration) authStyle() oauth2.AuthStyle {
	switch {
	case r.TokenEndpointAuthMethod == "client_secret_post", r.TokenEndpointAuthMethod == "none":
		return oauth2.AuthStyleInParams
	case r.TokenEndpointAuthMethod == "" && r.ClientSecret == "":
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader // client_secret_basic, RFC 7591's default
}

// registerClient registers a public native client whose one redirect URI
// is redirectURI. No error text holds the answer's body: it may hold the
// client's secret.
func registerClient(ctx context.Context, client *http.Client, endpoint, redirectURI, name string) (*registration, error) {
	meta := map[string]any{
		"redirect_uris":              []string{redirectURI},
		"client_name":                name,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": string(AuthNone),
		"application_type":           "native", // the redirect URI is on loopback
	}
	payload, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("registration endpoint is not a URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("registering a client: %w", plainErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistration+1))
	if err != nil {
		return nil, fmt.Errorf("registering a client: reading the answer: %w", err)
	}
	if len(body) > maxRegistration {
		return nil, fmt.Errorf("registering a client: the answer is over %d bytes", maxRegistration)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("registering a client: the registration endpoint answered HTTP %d with error %s; configure a pre-registered client (auth.client_id) if the server does not take dynamic registration", resp.StatusCode, safeCode(e.Error))
		}
		return nil, fmt.Errorf("registering a client: the registration endpoint answered HTTP %d; configure a pre-registered client (auth.client_id) if the server does not take dynamic registration", resp.StatusCode)
	}
	var r registration
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("registering a client: the answer is not a JSON client registration")
	}
	if r.ClientID == "" {
		return nil, fmt.Errorf("registering a client: the answer holds no client_id")
	}
	return &r, nil
}
