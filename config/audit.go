package config

import (
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// Audit is the audit log setting: where one JSON line per decision goes
// (see package audit). The zero Audit writes none.
type Audit struct {
	// To is a file path (relative paths are against the config file's
	// directory), or stdout or stderr.
	To string
	// MaxSizeMB rotates the file past this many megabytes; Keep is how
	// many rotated files are kept. 0: the defaults (100, 5).
	MaxSizeMB int
	Keep      int
	// Args writes each call's arguments, secret-named fields redacted;
	// without it a line carries their SHA-256 only.
	Args bool
}

// readAudit reads the top-level audit mapping.
func readAudit(r *reader, n *yaml.Node, dir string) (Audit, bool) {
	const want = "to: PATH|stdout|stderr, max_size_mb: N, keep: N, args: true|false"
	var a Audit
	if isNull(n) || !r.mapping(n, "audit", want) {
		return a, false
	}
	f := r.fields(n, "audit.", "to", "max_size_mb", "keep", "args")
	p, ok := f["to"]
	if !ok {
		r.errorf(n.Line, "audit.to", "required: a file path, or stdout or stderr for a log collector")
		return a, false
	}
	t, ok := r.text(p.v, "audit.to")
	if !ok || t.s == "" {
		r.errorf(p.v.Line, "audit.to", "is empty; write a file path, or stdout or stderr")
		return a, false
	}
	a.To = t.s
	if a.To != "stdout" && a.To != "stderr" && !filepath.IsAbs(a.To) && dir != "" {
		a.To = filepath.Join(dir, a.To)
	}
	if p, ok := f["max_size_mb"]; ok {
		a.MaxSizeMB, _ = r.count(p.v, "audit.max_size_mb")
	}
	if p, ok := f["keep"]; ok {
		a.Keep, _ = r.count(p.v, "audit.keep")
	}
	if p, ok := f["args"]; ok {
		a.Args, _ = r.boolean(p.v, "audit.args")
	}
	return a, true
}
