package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestRemoteBatchIsTaken: a streamable-HTTP server that answers a call with
// a JSON-RPC batch, as protocol 2025-03-26 allows, in an SSE event or as a
// JSON body, has each message in it taken as if it came alone: the
// notification is heard, the request is answered, the response answers its
// call.
func TestRemoteBatchIsTaken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter, batch string)
	}{
		{"event", func(w http.ResponseWriter, batch string) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: ev-1\ndata: "+batch+"\n\n")
		}},
		{"event over several data lines", func(w http.ResponseWriter, batch string) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+strings.ReplaceAll(batch, "},{", "},\ndata: {")+"\n\n")
		}},
		{"json body", func(w http.ResponseWriter, batch string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "\n"+batch+"\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
				tc.write(w, fmt.Sprintf(`[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%s}},`+
					`{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"},`+
					`{"jsonrpc":"2.0","id":%s,"result":{"content":[],"n":%s}}]`, big, req.ID, big))
			}}}
			posted := make(chan *jsonrpc.Message, 1)
			f.answered = func(m *jsonrpc.Message) { posted <- m }
			log := newNotificationLog()
			inst := startSessionRemote(t, f, nil, Options{OnNotification: log.add})
			// The call has its response by the time the request is served:
			// the instance's handler answers it.
			h := newServerRequests()
			inst.SetServerRequestHandler(h.handle)
			raw, err := inst.CallTool(testContext(t), Call{Name: "t"})
			require.NoError(t, err)
			assert.JSONEq(t, `{"content":[],"n":`+big+`}`, string(raw))
			assert.Equal(t, Notification{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":` + big + `}`)}, log.waitLen(t, 1)[0])
			select {
			case m := <-posted:
				assert.JSONEq(t, `{"jsonrpc":"2.0","id":"srv-1","result":`+answerResult+`}`, string(m.Encode()))
			case <-testContext(t).Done():
				t.Fatal("the batch's request was not answered")
			}
			assert.Equal(t, []string{"roots/list "}, h.all())
		})
	}
}

// TestRemoteBatchOverTheBoundFailsItsCall: a batch of more messages than
// an upstream may send in one fails the call it answers, saying why, and
// none of its messages is taken.
func TestRemoteBatchOverTheBoundFailsItsCall(t *testing.T) {
	t.Parallel()
	f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
		w.Header().Set("Content-Type", "application/json")
		note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}},`
		_, _ = io.WriteString(w, "["+strings.Repeat(note, maxUpstreamBatch)+`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}]`)
	}}}
	var heard atomic.Int32
	inst := startSessionRemote(t, f, nil, Options{OnNotification: func(*Instance, Notification) { heard.Add(1) }})
	_, err := inst.CallTool(testContext(t), Call{Name: "t"})
	require.EqualError(t, err, fmt.Sprintf(`server "remote": it answered tools/call with a JSON-RPC batch that cannot be taken: `+
		`a batch of %d messages is over the limit of %d`, maxUpstreamBatch+1, maxUpstreamBatch))
	assert.Zero(t, heard.Load())
	require.NoError(t, inst.Ping(testContext(t)), "the connection still serves")
}
