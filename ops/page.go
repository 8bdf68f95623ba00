package ops

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"time"
)

//go:embed status.html
var pageFiles embed.FS

// page renders /status. html/template escapes every value by its context,
// so nothing a server or a config says can become markup or script.
var page = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"bytes":   humanBytes,
	"when":    func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05 MST") },
	"count":   func(n int) string { return fmt.Sprint(n) },
	"healthy": func(s string) bool { return s == stateOK },
}).ParseFS(pageFiles, "status.html"))

// refreshEvery is how often the page reloads its content.
const refreshEvery = 5 * time.Second

// pageData is what the template renders.
type pageData struct {
	Snapshot
	Nonce      string // of the inline style and script, for the CSP
	RefreshMS  int64
	RefreshSec int64
}

// StatusPage answers /status: the status for a person. The page is whole
// in itself (inline style and script, no external asset) and reloads its
// content every few seconds: the script fetches that part again
// (?part=content) and swaps it in; without script, a meta refresh reloads
// the page.
func (o *Ops) StatusPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowRead(w, r) {
			return
		}
		nonce := newNonce()
		var b bytes.Buffer
		data := pageData{Snapshot: o.snapshot(), Nonce: nonce, RefreshMS: refreshEvery.Milliseconds(), RefreshSec: int64(refreshEvery.Seconds())}
		// ?part=content is the page's own refresh: the part that changes.
		name := "status.html"
		if r.URL.Query().Get("part") == "content" {
			name = "content"
		}
		if err := page.ExecuteTemplate(&b, name, data); err != nil {
			o.opts.Logger.Error("rendering the status page failed", "err", err)
			http.Error(w, "cannot render the status page; /status.json has the same data", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		noStore(h)
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; script-src 'nonce-"+nonce+"'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		_, _ = w.Write(b.Bytes())
	})
}

func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:]) // no character HTML escapes
}

func humanBytes(n int64) string {
	switch {
	case n <= 0:
		return "–"
	case n < 1<<20:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
