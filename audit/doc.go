// Package audit writes the audit log: one JSON line per decision the
// gateway makes about a caller — every tool call however it arrived, every
// policy denial, every question a policy rule asked and its answer — to a
// file rotated by size, or to stdout or stderr for a log collector. A line
// names the principal (issuer, subject, client), never a token; arguments
// appear as a SHA-256, and in full only when the operator turns that on,
// with secret-named fields redacted. Writing never blocks a call: lines go
// through a bounded queue, and what does not fit is dropped, counted and
// logged. The writer gathers what the queue holds for a few milliseconds,
// encodes it with an append-style encoder (the bytes encoding/json would
// write, without its reflection) into one reused buffer, and writes the
// batch with one system call.
package audit
