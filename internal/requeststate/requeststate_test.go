package requeststate

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func claims(now time.Time) Claims {
	return Claims{
		Exchange: NewNonce(),
		Round:    3,
		Caller:   CallerDigest("meta:conversation-1"),
		Request:  Digest{1, 2, 3},
		Expires:  now.Add(time.Minute),
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	c, err := New()
	require.NoError(t, err)
	want := claims(time.Now())
	token := c.Seal(want)
	assert.True(t, strings.HasPrefix(token, Prefix))
	assert.LessOrEqual(t, len(token), MaxLen)
	got, err := c.Open(token)
	require.NoError(t, err)
	assert.Equal(t, want.Exchange, got.Exchange)
	assert.Equal(t, want.Round, got.Round)
	assert.Equal(t, want.Caller, got.Caller)
	assert.Equal(t, want.Request, got.Request)
	assert.NotEqual(t, Nonce{}, got.Nonce, "a zero nonce is replaced by a random one")
	assert.True(t, want.Expires.Equal(got.Expires))
	assert.NotEqual(t, token, c.Seal(want), "two tokens for the same claims differ")
}

func TestOpenRefuses(t *testing.T) {
	c, err := New()
	require.NoError(t, err)
	other, err := New()
	require.NoError(t, err)
	now := time.Now()
	token := c.Seal(claims(now))
	raw, err := base64.RawURLEncoding.DecodeString(token[len(Prefix):])
	require.NoError(t, err)

	flipped := append([]byte(nil), raw...)
	flipped[10] ^= 1 // a claim changed, the MAC kept
	badMAC := append([]byte(nil), raw...)
	badMAC[len(badMAC)-1] ^= 1

	expiredCodec := &Codec{key: c.key, now: func() time.Time { return now.Add(2 * time.Minute) }}

	for name, tc := range map[string]struct {
		codec *Codec
		token string
		want  error
	}{
		"empty":            {c, "", ErrMalformed},
		"no prefix":        {c, token[len(Prefix):], ErrMalformed},
		"not base64":       {c, Prefix + "!!!!", ErrMalformed},
		"truncated":        {c, token[:len(token)-4], ErrMalformed},
		"too long":         {c, token + strings.Repeat("A", MaxLen), ErrMalformed},
		"claim changed":    {c, Prefix + base64.RawURLEncoding.EncodeToString(flipped), ErrForged},
		"mac changed":      {c, Prefix + base64.RawURLEncoding.EncodeToString(badMAC), ErrForged},
		"another process":  {other, token, ErrForged},
		"expired":          {expiredCodec, token, ErrExpired},
		"upstream's state": {c, "eyJzdGVwIjoxfQ", ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.codec.Open(tc.token)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestRequestDigest(t *testing.T) {
	base, err := RequestDigest("tools/call", []byte(`{"name":"ask","arguments":{"a":1,"b":[1,2]}}`))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		method string
		params string
		same   bool
	}{
		"reordered":         {"tools/call", `{"arguments":{"b":[1,2],"a":1},"name":"ask"}`, true},
		"retry members":     {"tools/call", `{"name":"ask","arguments":{"a":1,"b":[1,2]},"inputResponses":{"r1":{}},"requestState":"x","_meta":{"progressToken":2}}`, true},
		"whitespace":        {"tools/call", "{ \"name\" : \"ask\",\n \"arguments\" : { \"a\" : 1 , \"b\" : [ 1 , 2 ] } }", true},
		"argument changed":  {"tools/call", `{"name":"ask","arguments":{"a":2,"b":[1,2]}}`, false},
		"number spelled":    {"tools/call", `{"name":"ask","arguments":{"a":1.0,"b":[1,2]}}`, false},
		"other tool":        {"tools/call", `{"name":"ask2","arguments":{"a":1,"b":[1,2]}}`, false},
		"other method":      {"prompts/get", `{"name":"ask","arguments":{"a":1,"b":[1,2]}}`, false},
		"member added":      {"tools/call", `{"name":"ask","arguments":{"a":1,"b":[1,2]},"task":{}}`, false},
		"arguments dropped": {"tools/call", `{"name":"ask"}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := RequestDigest(tc.method, []byte(tc.params))
			require.NoError(t, err)
			assert.Equal(t, tc.same, Equal(base, d))
		})
	}
	_, err = RequestDigest("tools/call", []byte(`[1]`))
	assert.Error(t, err)
}
