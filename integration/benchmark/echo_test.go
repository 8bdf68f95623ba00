package benchmark

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// The echo upstream answers initialize, tools/list and tools/call echo {text} with JSON
// framed by hand around the request's own id and text, and does nothing else: no typed
// server, no goroutine per request, no re-encoding. It is far cheaper per call than any
// real MCP server, so that in BenchmarkCall what the aggregator costs is not hidden behind
// what the upstream costs.

// echoToolJSON is the one tool the echo upstream lists.
const echoToolJSON = `{"name":"echo","description":"Returns its text argument unchanged.",` +
	`"inputSchema":{"type":"object","properties":{"text":{"type":"string","description":"Text to return."}},"required":["text"]},` +
	`"annotations":{"readOnlyHint":true}}`

// echoRequest is what the echo upstream reads of a message; the id and the text are kept
// raw and written back as they came.
type echoRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
		Name            string          `json:"name"`
		Arguments       struct {
			Text json.RawMessage `json:"text"`
		} `json:"arguments"`
	} `json:"params"`
}

// echoAnswer returns the response to one message, or nil when none is due (a
// notification, a response, an unreadable line).
func echoAnswer(msg []byte) []byte {
	var req echoRequest
	if json.Unmarshal(msg, &req) != nil || req.Method == "" || len(req.ID) == 0 {
		return nil
	}
	b := make([]byte, 0, 128)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, req.ID...)
	switch {
	case req.Method == "tools/call" && req.Params.Name == "echo" && len(req.Params.Arguments.Text) > 0:
		b = append(b, `,"result":{"content":[{"type":"text","text":`...)
		b = append(b, req.Params.Arguments.Text...)
		b = append(b, `}]}}`...)
	case req.Method == "tools/call":
		b = append(b, `,"error":{"code":-32602,"message":"only echo {text} is served"}}`...)
	case req.Method == "tools/list":
		b = append(b, `,"result":{"tools":[`+echoToolJSON+`]}}`...)
	case req.Method == "initialize" && len(req.Params.ProtocolVersion) > 0:
		b = append(b, `,"result":{"protocolVersion":`...)
		b = append(b, req.Params.ProtocolVersion...) // whatever the client asks for
		b = append(b, `,"capabilities":{"tools":{}},"serverInfo":{"name":"bench-echo","version":"1.0.0"}}}`...)
	case req.Method == "ping":
		b = append(b, `,"result":{}}`...)
	default:
		b = append(b, `,"error":{"code":-32601,"message":"method not found"}}`...)
	}
	return b
}

// serveEchoStdio answers newline-delimited messages from in on out until in ends.
// Answers are buffered and written whenever no further input is waiting, so that
// requests that arrive together leave together.
func serveEchoStdio(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	var long []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if resp := echoAnswer(bytes.TrimSpace(line)); resp != nil {
			_, _ = w.Write(resp)
			_ = w.WriteByte('\n')
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return w.Flush()
			}
			return err
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// maxEchoBody bounds one HTTP request body of the echo upstream.
const maxEchoBody = 1 << 20

// echoHandler is the echo upstream as a streamable-HTTP endpoint without sessions: each
// POST is answered with one JSON body; there is no GET stream (405, as the spec allows).
func echoHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEchoBody))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	resp := echoAnswer(body)
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp)
}

// serveEchoHTTP serves echoHandler at /mcp on a loopback port until told to stop.
func serveEchoHTTP() error {
	return serveHTTPHelper(http.HandlerFunc(echoHandler))
}

// serveHTTPHelper serves h at /mcp on a loopback port, says where on stderr, and returns
// when the process is told to stop.
func serveHTTPHelper(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() { <-stop; _ = srv.Close() }()
	fmt.Fprintf(os.Stderr, "msg=listening url=http://%s/mcp\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
