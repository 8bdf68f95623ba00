package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"
)

// maxPendingLogins bounds the logins waiting at a gateway's callback.
const maxPendingLogins = 1024

// Redirects is a gateway's own redirect endpoint for the logins it runs
// for its callers: one URL for many logins under way, each answered by the
// state of its authorization request, and by no other (a stray or forged
// request ends no login). Serve it at the path of its URL.
type Redirects struct {
	uri     string
	mu      sync.Mutex
	pending map[string]chan redirect
}

// NewRedirects returns the endpoint whose URL, registered with and sent to
// the authorization servers, is uri.
func NewRedirects(uri string) *Redirects {
	return &Redirects{uri: uri, pending: map[string]chan redirect{}}
}

// ServeHTTP takes an authorization response (GET query, or form_post).
func (rs *Redirects) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed authorization response", http.StatusBadRequest)
		return
	}
	got := redirect{code: r.Form.Get("code"), state: r.Form.Get("state"), iss: r.Form.Get("iss"), err: r.Form.Get("error")}
	rs.mu.Lock()
	ch := rs.pending[got.state]
	if ch != nil && (got.code != "" || got.err != "") {
		delete(rs.pending, got.state)
	}
	rs.mu.Unlock()
	if got.state == "" || ch == nil || (got.code == "" && got.err == "") {
		http.Error(w, "this is not the answer to a login under way (it may have ended already)", http.StatusBadRequest)
		return
	}
	ch <- got // buffered, and deleted from pending: one send
	if got.err != "" {
		page(w, "Login declined", "The authorization server answered "+safeCode(got.err)+". You can close this window.")
		return
	}
	page(w, "Logged in", "mcp-aggregator received the authorization. You can close this window and go back to your client.")
}

// begin is one login's wait at the endpoint.
func (rs *Redirects) begin() *redirectWait {
	return &redirectWait{rs: rs, result: make(chan redirect, 1)}
}

// redirectWait is a login's end of Redirects: the redirectTarget Login
// uses in place of a loopback listener.
type redirectWait struct {
	rs     *Redirects
	state  string
	result chan redirect
	full   bool
}

func (w *redirectWait) redirectURI() string { return w.rs.uri }

func (w *redirectWait) expect(state string) {
	w.rs.mu.Lock()
	defer w.rs.mu.Unlock()
	if len(w.rs.pending) >= maxPendingLogins {
		w.full = true
		return
	}
	w.state = state
	w.rs.pending[state] = w.result
}

func (w *redirectWait) wait(ctx context.Context) (redirect, error) {
	if w.full {
		return redirect{}, errors.New("too many logins are under way at this gateway; try again in a few minutes")
	}
	select {
	case r := <-w.result:
		return r, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return redirect{}, errors.New("timed out waiting for the browser to come back from the authorization server; call the tool again for a new link")
		}
		return redirect{}, ctx.Err()
	}
}

func (w *redirectWait) close() {
	w.rs.mu.Lock()
	defer w.rs.mu.Unlock()
	if w.state != "" && w.rs.pending[w.state] == w.result {
		delete(w.rs.pending, w.state)
	}
}
