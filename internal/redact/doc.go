// Package redact keeps secret values out of logs. A Set holds the values the
// aggregator knows to be secret (every server's env and header values, URL
// credentials); its Handler replaces them in every log record, whichever
// server, upstream or library the record is about.
package redact
