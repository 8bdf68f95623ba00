package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestStore() *rawStore {
	cat := catalogOf([]*Entry{entry("a", "a_one", `{"name":"a_one","inputSchema":{"type":"object","big":12345678901234567890}}`)})
	return newRawStore(func() *Catalog { return cat })
}

// resultPlaceholder is how mcp-go renders the result the call handler returns.
func resultPlaceholder(id, token, extra string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"_meta":{"` + rawMarker + `":` + strconv.Quote(token) + `}` + extra + `,"content":[]}}`)
}

func errorPlaceholder(id, token string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"` + rawMarker + `:` + token + `"}}`)
}

func TestSubstitute(t *testing.T) {
	const richResult = `{"content":[{"type":"future","x":{"big":12345678901234567890}},{"type":"text","text":"<&>"}],"isError":false,"_meta":{"k":1}}`
	const errorObject = `{"code":-32042,"message":"refused","data":{"big":12345678901234567890,"nested":{"a":[true,null]}}}`

	tests := []struct {
		name string
		kind rawKind
		body string
		msg  func(token string) []byte
		want string
	}{
		{"result", rawResult, richResult,
			func(tok string) []byte { return resultPlaceholder(`7`, tok, "") },
			`{"jsonrpc":"2.0","id":7,"result":` + richResult + `}`},
		{"result with a string id", rawResult, `{"content":[]}`,
			func(tok string) []byte { return resultPlaceholder(`"req-1"`, tok, "") },
			`{"jsonrpc":"2.0","id":"req-1","result":{"content":[]}}`},
		{"error", rawError, errorObject,
			func(tok string) []byte { return errorPlaceholder(`8`, tok) },
			`{"jsonrpc":"2.0","id":8,"error":` + errorObject + `}`},
		{"tools list", rawToolList, "",
			func(tok string) []byte { return resultPlaceholder(`9`, tok, "") },
			`{"jsonrpc":"2.0","id":9,"result":{"tools":[{"name":"a_one","inputSchema":{"type":"object","big":12345678901234567890}}]}}`},
		{"tools list keeps resultType", rawToolList, "",
			func(tok string) []byte { return resultPlaceholder(`10`, tok, `,"resultType":"complete"`) },
			`{"jsonrpc":"2.0","id":10,"result":{"tools":[{"name":"a_one","inputSchema":{"type":"object","big":12345678901234567890}}],"resultType":"complete"}}`},
		{"result gains resultType", rawResult, `{"content":[]}`,
			func(tok string) []byte { return resultPlaceholder(`11`, tok, `,"resultType":"complete"`) },
			`{"jsonrpc":"2.0","id":11,"result":{"resultType":"complete","content":[]}}`},
		{"result keeps its own resultType", rawResult, `{"resultType":"partial","content":[]}`,
			func(tok string) []byte { return resultPlaceholder(`12`, tok, `,"resultType":"complete"`) },
			`{"jsonrpc":"2.0","id":12,"result":{"resultType":"partial","content":[]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore()
			var body json.RawMessage
			if tc.body != "" {
				body = json.RawMessage(tc.body)
			}
			token := s.put(tc.kind, body)
			msg := tc.msg(token)
			assert.Equal(t, tc.want, string(s.substitute(msg)))
			assert.Equal(t, string(msg), string(s.substitute(msg)), "a token is used once")
		})
	}
}

func TestSubstituteLeavesOtherMessagesAlone(t *testing.T) {
	s := newTestStore()
	known := s.put(rawResult, json.RawMessage(`{"content":[]}`))
	tests := []struct {
		name string
		msg  []byte
	}{
		{"no marker", []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`)},
		{"unknown token", resultPlaceholder(`2`, "zzz-unknown", "")},
		{"unknown error token", errorPlaceholder(`3`, "zzz-unknown")},
		{"marker in ordinary text", []byte(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"` + rawMarker + `"}]}}`)},
		{"error without the prefix", []byte(`{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"see ` + rawMarker + `:` + known + `"}}`)},
		{"notification", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"_meta":{"` + rawMarker + `":"` + known + `"}}}`)},
		{"not JSON", []byte(`{"jsonrpc":"2.0","id":6,` + rawMarker)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := s.substitute(tc.msg)
			assert.Equal(t, string(tc.msg), string(got))
			require.NotEmpty(t, got)
			assert.Same(t, &tc.msg[0], &got[0], "the very same slice comes back")
		})
	}
	_, stillThere := s.take(known)
	assert.True(t, stillThere, "a message that is not its placeholder does not consume a token")
}

func TestWithResultType(t *testing.T) {
	tests := []struct{ body, rt, want string }{
		{`{"content":[]}`, `"complete"`, `{"resultType":"complete","content":[]}`},
		{`{}`, `"complete"`, `{"resultType":"complete"}`},
		{`{ }`, `"complete"`, `{"resultType":"complete"}`},
		{"{\n  \"a\": 1}", `"complete"`, `{"resultType":"complete","a": 1}`},
		{`{"resultType":"x"}`, `"complete"`, `{"resultType":"x"}`},
		{`{"content":[]}`, ``, `{"content":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			assert.Equal(t, tc.want, string(withResultType(json.RawMessage(tc.body), json.RawMessage(tc.rt))))
		})
	}
}

func TestRawStoreSweep(t *testing.T) {
	s := newTestStore()
	token := s.put(rawResult, json.RawMessage(`{}`))
	s.sweep(time.Hour)
	_, ok := s.take(token)
	assert.True(t, ok, "young payloads stay")
	token = s.put(rawResult, json.RawMessage(`{}`))
	s.sweep(-time.Second)
	_, ok = s.take(token)
	assert.False(t, ok, "old payloads are dropped")
}

func TestLineWriter(t *testing.T) {
	s := newTestStore()
	var out bytes.Buffer
	w := &lineWriter{store: s, progress: newProgressTracker(), out: &out}

	token := s.put(rawResult, json.RawMessage(`{"content":[{"type":"text","text":"raw"}],"x":12345678901234567890}`))
	line := append(resultPlaceholder(`1`, token, ""), '\n')
	n, err := w.Write(line)
	require.NoError(t, err)
	assert.Equal(t, len(line), n, "mcp-go sees its whole write accepted")
	plain := []byte(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n")
	n, err = w.Write(plain)
	require.NoError(t, err)
	assert.Equal(t, len(plain), n)

	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"raw"}],"x":12345678901234567890}}`+"\n"+string(plain), out.String())
}

func TestHTTPWriter(t *testing.T) {
	const body = `{"content":[{"type":"text","text":"raw"}],"x":12345678901234567890}`
	want := `{"jsonrpc":"2.0","id":1,"result":` + body + `}`

	t.Run("plain JSON body", func(t *testing.T) {
		s := newTestStore()
		rec := httptest.NewRecorder()
		w := &httpWriter{ResponseWriter: rec, store: s, progress: newProgressTracker()}
		msg := append(resultPlaceholder(`1`, s.put(rawResult, json.RawMessage(body)), ""), '\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(http.StatusOK)
		n, err := w.Write(msg)
		require.NoError(t, err)
		assert.Equal(t, len(msg), n)
		assert.Empty(t, rec.Header().Get("Content-Length"), "a substituted body has another length")
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		assert.Equal(t, want+"\n", rec.Body.String())
	})

	t.Run("SSE event", func(t *testing.T) {
		s := newTestStore()
		rec := httptest.NewRecorder()
		w := &httpWriter{ResponseWriter: rec, store: s, progress: newProgressTracker()}
		progress := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n")
		_, err := w.Write(progress)
		require.NoError(t, err)
		event := append(append([]byte("event: message\ndata: "), resultPlaceholder(`1`, s.put(rawResult, json.RawMessage(body)), "")...), "\n\n"...)
		n, err := w.Write(event)
		require.NoError(t, err)
		assert.Equal(t, len(event), n)
		assert.Equal(t, string(progress)+"event: message\ndata: "+want+"\n\n", rec.Body.String())
		assert.True(t, rec.Flushed)
	})

	t.Run("Unwrap", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := &httpWriter{ResponseWriter: rec}
		assert.Same(t, rec, w.Unwrap())
	})
}
