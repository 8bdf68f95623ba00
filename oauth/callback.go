package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"sync"
	"time"
)

// callbackPath is where the authorization server sends the browser back.
const callbackPath = "/callback"

// redirect is what one authorization response carried (RFC 6749 §4.1.2,
// RFC 9207 for iss).
type redirect struct {
	code, state, iss string
	err              string // the error code when the user or the server declined
}

// callback is the loopback listener the browser is redirected to: an
// ephemeral port on 127.0.0.1, one path, and one answer taken, the first
// whose state matches the authorization request (a stray or forged request
// cannot end the login).
type callback struct {
	ln     net.Listener
	srv    *http.Server
	mu     sync.Mutex
	state  string
	result chan redirect
}

// listenCallback starts the listener.
func listenCallback() (*callback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on a loopback port for the browser's redirect: %w", err)
	}
	cb := &callback{ln: ln, result: make(chan redirect, 1)}
	cb.srv = &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	go func() { _ = cb.srv.Serve(ln) }()
	return cb, nil
}

// redirectURI is the URI registered with, and sent to, the authorization server.
func (cb *callback) redirectURI() string {
	return "http://" + cb.ln.Addr().String() + callbackPath
}

// expect sets the state the answer must carry.
func (cb *callback) expect(state string) {
	cb.mu.Lock()
	cb.state = state
	cb.mu.Unlock()
}

func (cb *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != callbackPath || (r.Method != http.MethodGet && r.Method != http.MethodPost) {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil { // GET query, or form_post
		http.Error(w, "malformed authorization response", http.StatusBadRequest)
		return
	}
	got := redirect{code: r.Form.Get("code"), state: r.Form.Get("state"), iss: r.Form.Get("iss"), err: r.Form.Get("error")}
	cb.mu.Lock()
	want := cb.state
	cb.mu.Unlock()
	if want == "" || got.state != want || (got.code == "" && got.err == "") {
		http.Error(w, "this is not the answer to the login under way", http.StatusBadRequest)
		return
	}
	select {
	case cb.result <- got:
	default:
		page(w, "Already done", "This login has already been answered. You can close this window.")
		return
	}
	if got.err != "" {
		// The answer's issuer is not checked yet: its error is not shown.
		page(w, "Login not completed", "The authorization request did not end with an authorization. You can close this window; mcp-aggregator says what to do next.")
		return
	}
	page(w, "Logged in", "mcp-aggregator received the authorization. You can close this window.")
}

// page writes a small HTML page.
func page(w http.ResponseWriter, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	fmt.Fprintf(w, "<!doctype html><title>%s</title><p>%s</p>\n", html.EscapeString(title), html.EscapeString(text))
}

// wait returns the answer, or fails when ctx ends.
func (cb *callback) wait(ctx context.Context) (redirect, error) {
	select {
	case r := <-cb.result:
		return r, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return redirect{}, errors.New("timed out waiting for the browser to come back from the authorization server; run login again and finish in the browser sooner, or raise --timeout")
		}
		return redirect{}, ctx.Err()
	}
}

// close stops the listener, giving the browser's last page a moment.
func (cb *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = cb.srv.Shutdown(ctx)
}
