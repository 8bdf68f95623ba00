package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSecretNeverPrints(t *testing.T) {
	const token = "tok-5b1e0f8a"
	c := &Caller{Principal: Subject("https://id.example", "person-1"), Client: "agent",
		Claims: map[string]any{"sub": "person-1"}, Token: NewSecret(token)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		assert.NotContains(t, fmt.Sprintf(verb, c), token, verb)
		assert.NotContains(t, fmt.Sprintf(verb, *c), token, verb)
		assert.NotContains(t, fmt.Sprintf(verb, c.Token), token, verb)
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	assert.NotContains(t, string(b), token)
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("call", "caller", c, "token", c.Token)
	}
	assert.NotContains(t, buf.String(), token)
	assert.Equal(t, token, c.Token.Reveal())
}

func TestCallerOnContext(t *testing.T) {
	assert.True(t, CallerOf(context.Background()).Principal.IsZero(), "no caller: the zero Caller")
	c := Caller{Principal: Subject("https://id.example", "alice"), Client: "agent", Token: NewSecret("t")}
	got := CallerOf(WithCaller(context.Background(), c))
	assert.Equal(t, c.Principal, got.Principal)
	assert.Equal(t, "t", got.Token.Reveal())
}
