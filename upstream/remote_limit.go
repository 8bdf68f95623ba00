package upstream

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// mcp-go reads a remote upstream's messages whole: an SSE line with
// ReadString, a JSON body with a json.Decoder. Without a bound, one endless
// event or body would grow one buffer until memory runs out. limitedTransport
// puts the bound under mcp-go, on the response bodies themselves: an SSE
// event, or any other body, over max bytes ends its body with a
// *jsonrpc.TooLongError. The call whose exchange it was learns that through
// its context (withSizeReport) and fails saying so; an oversized event on a
// stream no call owns is logged, and the stream ends.
//
// It is also where an event stream is tapped (eventTap): under the bound,
// so that the tap never holds more than one bounded event.
type limitedTransport struct {
	base   http.RoundTripper
	max    int
	server string
	log    *slog.Logger
	tap    streamSink // nil: event streams are not tapped
	// opened, when set, sees the answer to every GET before anyone reads
	// its body, which it may replace.
	opened func(req *http.Request, resp *http.Response)
	// dropped throttles the warning for a stream dropped over an oversized
	// event, as the stream's own failures are (noStreamNotice): mcp-go
	// opens the GET stream again every second.
	dropped throttledLog
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if req.Method == http.MethodGet && t.opened != nil {
		t.opened(req, resp)
	}
	stream := mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
	limited := &limitedBody{
		body: resp.Body, max: int64(t.max), perEvent: stream,
		report: reportOf(req.Context()), server: t.server, log: t.log, dropped: &t.dropped,
	}
	resp.Body = limited
	if stream && t.tap != nil {
		resp.Body = newEventTap(req.Context(), limited, t.tap)
	}
	return resp, nil
}

// limitedBody is a response body that fails once the current SSE event
// (perEvent) or the whole body is over max bytes.
type limitedBody struct {
	body     io.ReadCloser
	max      int64
	perEvent bool
	used     int64 // bytes of the current event, or of the body
	content  bool  // the current SSE line has more than its terminator
	err      error
	report   *sizeReport
	server   string
	log      *slog.Logger
	dropped  *throttledLog
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if b.over(p[:n]) {
		tooLong := &jsonrpc.TooLongError{Limit: int(b.max), Size: b.used}
		b.err = tooLong
		if b.report != nil {
			b.report.set(tooLong)
		} else {
			b.dropped.warn(b.log, "upstream sent a message over the size limit on its stream; the stream is dropped", "server", b.server, "limit", b.max)
		}
		return 0, b.err
	}
	return n, err
}

// over counts data and reports whether the event or body went over max. An
// SSE event ends at a blank line.
func (b *limitedBody) over(data []byte) bool {
	if !b.perEvent {
		b.used += int64(len(data))
		return b.used > b.max
	}
	for len(data) > 0 {
		line, rest, ended := bytes.Cut(data, []byte{'\n'})
		b.used += int64(len(line))
		if len(bytes.TrimRight(line, "\r")) > 0 {
			b.content = true
		}
		if b.used > b.max {
			return true
		}
		if !ended {
			return false
		}
		if !b.content {
			b.used = 0 // a blank line: the event is complete
		}
		b.content = false
		data = rest
	}
	return false
}

func (b *limitedBody) Close() error { return b.body.Close() }

// sizeReport carries an oversized response from limitedBody to the call
// whose exchange it was.
type sizeReport struct {
	mu  sync.Mutex
	err *jsonrpc.TooLongError
}

type sizeReportKey struct{}

// withSizeReport returns a context that carries a fresh report.
func withSizeReport(ctx context.Context) (context.Context, *sizeReport) {
	r := &sizeReport{}
	return context.WithValue(ctx, sizeReportKey{}, r), r
}

func reportOf(ctx context.Context) *sizeReport {
	r, _ := ctx.Value(sizeReportKey{}).(*sizeReport)
	return r
}

func (r *sizeReport) set(err *jsonrpc.TooLongError) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

func (r *sizeReport) tooLong() *jsonrpc.TooLongError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
