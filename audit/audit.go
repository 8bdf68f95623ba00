package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Principal is who a Record is about, as the audit log names it.
type Principal struct {
	Kind    string `json:"kind"` // subject, client, address, local
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	Client  string `json:"client,omitempty"`
}

// The outcomes of a Record.
const (
	OK       = "ok"       // the call was made and answered with a result
	Error    = "error"    // the call was made and failed (a tool error or a JSON-RPC error)
	Denied   = "denied"   // a policy rule denied it
	Approved = "approved" // a rule asked, the user accepted, and the call went ahead
	Declined = "declined" // a rule asked and the user declined
	Timeout  = "timeout"  // a rule asked and no answer came in time
)

// Record is one line of the audit log.
type Record struct {
	Time       time.Time       `json:"time"`
	Event      string          `json:"event"` // "tools/call"; later "login", "token_exchange"
	Principal  Principal       `json:"principal"`
	Session    string          `json:"session,omitempty"` // the session's digest, never its id
	View       string          `json:"view,omitempty"`
	Method     string          `json:"method"`
	Server     string          `json:"server,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	Original   string          `json:"original,omitempty"`
	ArgsSHA256 string          `json:"args_sha256,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"` // only with Config.Args, redacted
	Outcome    string          `json:"outcome"`
	Rule       string          `json:"rule,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	BytesIn    int             `json:"bytes_in"`
	BytesOut   int             `json:"bytes_out"`
	TraceID    string          `json:"trace_id,omitempty"`
}

// Config is where the audit log goes.
type Config struct {
	// To is a file path, or "stdout" or "stderr".
	To string
	// MaxBytes is the size past which a file is rotated (0: DefaultMaxBytes);
	// Keep is how many rotated files are kept (0: DefaultKeep).
	MaxBytes int64
	Keep     int
	// Args writes each call's arguments, secret-named fields redacted.
	Args bool
}

// Defaults of Config.
const (
	DefaultMaxBytes = 100 << 20
	DefaultKeep     = 5
	// queueSize bounds the records waiting to be written.
	queueSize = 4096
	// batchDelay is how long the writer gathers lines after the first of
	// a batch before it writes them all at once: one write system call per
	// batch, not per call. A queue half full ends the wait at once.
	batchDelay = 20 * time.Millisecond
	// maxBatch bounds the bytes of one batch's write.
	maxBatch = 256 << 10
)

// Log is an open audit log. A nil *Log writes nothing. Safe for concurrent
// use.
type Log struct {
	cfg     Config
	queue   chan Record
	hurry   chan struct{} // the queue is half full: write now
	done    chan struct{}
	dropped atomic.Uint64
	log     *slog.Logger
	closeMu sync.RWMutex
	closed  bool
}

// Open starts the audit log cfg describes; a file is created (0600) or
// appended to. Close it to flush.
func Open(cfg Config, log *slog.Logger) (*Log, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	var w sink
	switch cfg.To {
	case "stdout":
		w = &streamSink{w: os.Stdout}
	case "stderr":
		w = &streamSink{w: os.Stderr}
	default:
		f, err := openFile(cfg)
		if err != nil {
			return nil, err
		}
		w = f
	}
	l := &Log{cfg: cfg, queue: make(chan Record, queueSize), hurry: make(chan struct{}, 1), done: make(chan struct{}), log: log}
	go l.run(w)
	return l, nil
}

// Args reports whether records carry the call's arguments.
func (l *Log) Args() bool { return l != nil && l.cfg.Args }

// Config is what l was opened with.
func (l *Log) Config() Config {
	if l == nil {
		return Config{}
	}
	return l.cfg
}

// Write queues r; when the queue is full, r is dropped and counted. It
// never blocks.
func (l *Log) Write(r Record) {
	if l == nil {
		return
	}
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.queue <- r:
		if len(l.queue) >= cap(l.queue)/2 {
			select {
			case l.hurry <- struct{}{}:
			default:
			}
		}
	default:
		if n := l.dropped.Add(1); n&(n-1) == 0 { // 1, 2, 4, 8, ...: logged, not flooded
			l.log.Warn("audit log: records dropped, the writer cannot keep up", "dropped", n, "to", l.cfg.To,
				"fix", "write the audit log to a faster disk or to stdout for a collector")
		}
	}
}

// Dropped is how many records were dropped because the queue was full.
func (l *Log) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Close writes what is queued and closes the file.
func (l *Log) Close() {
	if l == nil {
		return
	}
	l.closeMu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.closeMu.Unlock()
	<-l.done
}

// run writes the queued records in batches: it waits for a record, gives
// the queue batchDelay (less when it fills) to gather more, encodes all
// that are queued (AppendLine) into one reused buffer and hands it to w in
// one write.
func (l *Log) run(w sink) {
	defer close(l.done)
	defer w.Close()
	batch := make([]byte, 0, 16<<10)
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	failed := false
	for {
		r, ok := <-l.queue
		if !ok {
			return
		}
		batch = AppendLine(batch[:0], &r)
		delay.Reset(batchDelay)
		select {
		case <-delay.C:
		case <-l.hurry:
			delay.Stop()
		}
		closed := false
	gather:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-l.queue:
				if !ok {
					closed = true
					break gather
				}
				batch = AppendLine(batch, &r)
			default:
				break gather
			}
		}
		err := w.WriteBatch(batch)
		if err != nil && !failed {
			l.log.Error("audit log: writing failed; records are lost until it works again", "to", l.cfg.To, "err", err)
		}
		failed = err != nil
		if cap(batch) > 4*maxBatch {
			batch = make([]byte, 0, 16<<10) // a burst's buffer is not kept
		}
		if closed {
			return
		}
	}
}

// sink is where batches of whole lines go, each in one write where it can.
type sink interface {
	WriteBatch([]byte) error
	Close() error
}

type streamSink struct{ w io.Writer }

func (s *streamSink) WriteBatch(b []byte) error { _, err := s.w.Write(b); return err }
func (s *streamSink) Close() error              { return nil }

// fileSink is a file rotated by size: path, path.1, ..., path.Keep.
type fileSink struct {
	cfg  Config
	f    *os.File
	size int64
}

func openFile(cfg Config) (*fileSink, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.To), 0o700); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	f, err := os.OpenFile(cfg.To, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &fileSink{cfg: cfg, f: f, size: st.Size()}, nil
}

// WriteBatch writes b, whole lines, in one write; a batch that would take
// the file past MaxBytes is written line by line up to there, the file
// rotated, and the rest written to the new one.
func (s *fileSink) WriteBatch(b []byte) error {
	for len(b) > 0 {
		n := len(b)
		if s.size+int64(n) > s.cfg.MaxBytes {
			// The lines that still fit; at least one in a fresh file.
			room := s.cfg.MaxBytes - s.size
			n = 0
			for n < len(b) {
				end := len(b)
				if i := bytes.IndexByte(b[n:], '\n'); i >= 0 {
					end = n + i + 1
				}
				if int64(end) > room && (n > 0 || s.size > 0) {
					break
				}
				n = end
			}
			if n == 0 {
				if err := s.rotate(); err != nil {
					return err
				}
				continue
			}
		}
		w, err := s.f.Write(b[:n])
		s.size += int64(w)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (s *fileSink) rotate() error {
	if err := s.f.Close(); err != nil {
		return err
	}
	for i := s.cfg.Keep - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", s.cfg.To, i), fmt.Sprintf("%s.%d", s.cfg.To, i+1))
	}
	if err := os.Rename(s.cfg.To, s.cfg.To+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(s.cfg.To, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	s.f, s.size = f, 0
	return nil
}

func (s *fileSink) Close() error { return s.f.Close() }
