package benchmark

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// The bridge is the least one more HTTP hop can cost: an HTTP server that passes each
// request on as bytes and the answer back the same way, with no sessions, no checks and
// no MCP. It serves one client; that is all BenchmarkCall asks of it.

// serveBridge serves the bridge at /mcp in front of target: a URL, to which every request
// is forwarded, or a command, which is started and given each POST body as one line.
func serveBridge(target []string) error {
	if len(target) == 1 && strings.HasPrefix(target[0], "http://") {
		return serveHTTPHelper(&httpBridge{url: target[0], client: newHTTPClient()})
	}
	b, err := startStdioBridge(target)
	if err != nil {
		return err
	}
	return serveHTTPHelper(b)
}

// httpBridge forwards each request to url: same method, headers and body; the response's
// status, headers and body are copied back.
type httpBridge struct {
	url    string
	client *http.Client
}

func (b *httpBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, b.url, bytes.NewReader(body))
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone() // net/http sets Content-Length and Host itself
	resp, err := b.client.Do(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// stdioBridge writes each POST body as a line to a stdio upstream and answers the POST
// with the line that carries the same id. Notifications get 202 and no body.
type stdioBridge struct {
	writeMu sync.Mutex // one writer of stdin at a time
	stdin   io.Writer

	mu      sync.Mutex
	pending map[string]chan []byte // by raw request id
}

func startStdioBridge(command []string) (*stdioBridge, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &stdioBridge{stdin: in, pending: map[string]chan []byte{}}
	go b.read(out)
	return b, nil
}

// messageID is what the bridge reads of a message.
type messageID struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (b *stdioBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	var head messageID
	if err != nil || json.Unmarshal(body, &head) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	line := append(body, '\n')
	if head.Method == "" || len(head.ID) == 0 {
		_ = b.write(line)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	key := string(head.ID)
	answer := make(chan []byte, 1)
	b.mu.Lock()
	b.pending[key] = answer
	b.mu.Unlock()
	relayAnswer(w, r, func() error { return b.write(line) }, answer, func() {
		b.mu.Lock()
		delete(b.pending, key)
		b.mu.Unlock()
	})
}

// relayAnswer sends a request upstream with send and answers the HTTP
// request r with what comes on answer; a request whose client leaves
// first is forgotten (forget), one that cannot be sent is a 502.
func relayAnswer(w http.ResponseWriter, r *http.Request, send func() error, answer <-chan []byte, forget func()) {
	if err := send(); err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	select {
	case resp := <-answer:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
	case <-r.Context().Done():
		forget()
	}
}

func (b *stdioBridge) write(line []byte) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	_, err := b.stdin.Write(line)
	return err
}

// read hands each response line from the upstream to the POST waiting for its id.
func (b *stdioBridge) read(out io.Reader) {
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		var head messageID
		if json.Unmarshal(line, &head) == nil && head.Method == "" {
			b.mu.Lock()
			answer := b.pending[string(head.ID)]
			delete(b.pending, string(head.ID))
			b.mu.Unlock()
			if answer != nil {
				answer <- bytes.TrimSpace(line)
			}
		}
		if err != nil {
			os.Exit(0) // the upstream is gone; so is the bridge
		}
	}
}
