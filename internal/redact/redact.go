package redact

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Placeholder replaces a secret.
const Placeholder = "<redacted>"

// MinLen is the length from which a value is redacted wherever it appears. Shorter
// values ("true", "info", "8080") are common words of any log line; the upstream
// package still scrubs them from the lines about the server that holds them.
const MinLen = 8

// Set is a set of secret values, safe for concurrent use. A value stays until it
// is retired and its time has passed (a replaced token that no longer works): a
// process started with an old value may still print it, which does no harm once
// the value opens nothing.
type Set struct {
	mu       sync.Mutex
	values   map[string]struct{}
	retired  map[string]time.Time             // values to drop once the time has passed
	now      func() time.Time                 // the clock (tests); nil: time.Now
	replacer atomic.Pointer[strings.Replacer] // nil while the set is empty
}

// Lines returns a value of several lines (a PEM key) and each of its lines,
// trimmed: a process prints such a value one line at a time, and a log or an
// error quotes it line by line, so each line is a secret too. A value of one
// line is returned alone.
func Lines(value string) []string {
	if !strings.ContainsAny(value, "\r\n") {
		return []string{value}
	}
	out := []string{value}
	for _, line := range strings.FieldsFunc(value, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// Add adds values, and each line of a value of several lines (Lines),
// ignoring those shorter than MinLen. A retired value added again is live
// again: it stays.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	all := values
	for _, v := range values {
		if strings.ContainsAny(v, "\r\n") {
			if len(all) == len(values) {
				all = append([]string(nil), values...) // not into the caller's array
			}
			all = append(all, Lines(v)[1:]...)
		}
	}
	for _, v := range all {
		if len(v) < MinLen {
			continue
		}
		delete(s.retired, v)
		if _, ok := s.values[v]; ok {
			continue
		}
		if s.values == nil {
			s.values = map[string]struct{}{}
		}
		s.values[v] = struct{}{}
		changed = true
	}
	if s.prune() || changed {
		s.rebuild()
	}
}

// Retire lets values leave the set once after has passed, the time from which
// they work nowhere (an access token's expiry, a spent refresh token's grace). A
// value that is added again before then stays. The set is pruned on every Add and
// Retire, so that one that only ever replaces its tokens does not grow.
func (s *Set) Retire(after time.Time, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if _, ok := s.values[v]; !ok {
			continue
		}
		if s.retired == nil {
			s.retired = map[string]time.Time{}
		}
		if t, ok := s.retired[v]; !ok || after.After(t) {
			s.retired[v] = after
		}
	}
	if s.prune() {
		s.rebuild()
	}
}

// Len is how many values the set holds.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values)
}

// prune drops the retired values whose time has passed and reports whether any
// was; callers hold s.mu.
func (s *Set) prune() bool {
	if len(s.retired) == 0 {
		return false
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	t := now()
	pruned := false
	for v, after := range s.retired {
		if t.After(after) {
			delete(s.retired, v)
			delete(s.values, v)
			pruned = true
		}
	}
	return pruned
}

// rebuild makes the replacer of the values; callers hold s.mu.
func (s *Set) rebuild() {
	if len(s.values) == 0 {
		s.replacer.Store(nil)
		return
	}
	all := make([]string, 0, len(s.values))
	for v := range s.values {
		all = append(all, v)
	}
	// Longest first: at one position the replacer tries its pairs in order, so a
	// secret that contains another is replaced whole.
	sort.Slice(all, func(i, j int) bool {
		if len(all[i]) != len(all[j]) {
			return len(all[i]) > len(all[j])
		}
		return all[i] < all[j]
	})
	pairs := make([]string, 0, 2*len(all))
	for _, v := range all {
		pairs = append(pairs, v, Placeholder)
	}
	s.replacer.Store(strings.NewReplacer(pairs...))
}

// String returns text with every secret of the set replaced.
func (s *Set) String(text string) string {
	if s == nil {
		return text
	}
	r := s.replacer.Load()
	if r == nil {
		return text
	}
	return r.Replace(text)
}

// Handler wraps h so that every record it handles, message and attributes, has the
// set's secrets replaced.
func (s *Set) Handler(h slog.Handler) slog.Handler { return handler{next: h, set: s} }

type handler struct {
	next slog.Handler
	set  *Set
}

func (h handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if h.set.replacer.Load() == nil {
		return h.next.Handle(ctx, r)
	}
	clean := slog.NewRecord(r.Time, r.Level, h.set.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		clean.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, clean)
}

// attr scrubs one attribute; values that cannot hold text pass unchanged.
func (h handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		attrs := v.Group()
		clean := make([]any, len(attrs))
		for i, ga := range attrs {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindString, slog.KindAny:
		s := v.String()
		if c := h.set.String(s); c != s || v.Kind() == slog.KindString {
			return slog.String(a.Key, c)
		}
		return slog.Attr{Key: a.Key, Value: v}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	// Attributes bound now are scrubbed now; a secret added later is caught in the
	// records' own attributes and message, which is where upstream output goes.
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return handler{next: h.next.WithAttrs(clean), set: h.set}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{next: h.next.WithGroup(name), set: h.set}
}
