package audit

import (
	"bufio"
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
)

// Log is an open audit log. A nil *Log writes nothing. Safe for concurrent
// use.
type Log struct {
	cfg     Config
	queue   chan Record
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
	l := &Log{cfg: cfg, queue: make(chan Record, queueSize), done: make(chan struct{}), log: log}
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

func (l *Log) run(w sink) {
	defer close(l.done)
	defer w.Close()
	failed := false
	for r := range l.queue {
		line, err := json.Marshal(r)
		if err == nil {
			err = w.WriteLine(append(line, '\n'))
		}
		if err != nil && !failed {
			l.log.Error("audit log: writing failed; records are lost until it works again", "to", l.cfg.To, "err", err)
		}
		failed = err != nil
		if len(l.queue) == 0 {
			_ = w.Flush()
		}
	}
}

// sink is where lines go.
type sink interface {
	WriteLine([]byte) error
	Flush() error
	Close() error
}

type streamSink struct{ w io.Writer }

func (s *streamSink) WriteLine(b []byte) error { _, err := s.w.Write(b); return err }
func (s *streamSink) Flush() error             { return nil }
func (s *streamSink) Close() error             { return nil }

// fileSink is a file rotated by size: path, path.1, ..., path.Keep.
type fileSink struct {
	cfg  Config
	f    *os.File
	buf  *bufio.Writer
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
	return &fileSink{cfg: cfg, f: f, buf: bufio.NewWriter(f), size: st.Size()}, nil
}

func (s *fileSink) WriteLine(b []byte) error {
	if s.size > 0 && s.size+int64(len(b)) > s.cfg.MaxBytes {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	n, err := s.buf.Write(b)
	s.size += int64(n)
	return err
}

func (s *fileSink) rotate() error {
	if err := s.buf.Flush(); err != nil {
		return err
	}
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
	s.buf.Reset(f)
	return nil
}

func (s *fileSink) Flush() error { return s.buf.Flush() }

func (s *fileSink) Close() error {
	err := s.buf.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
