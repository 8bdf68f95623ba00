package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"time"

	"gopkg.in/yaml.v3"
)

// serverKeys are the keys a server definition may use.
var serverKeys = []string{
	"truely-stateless", "transport", "command", "args", "cwd", "env", "env_file", "inherit_env",
	"url", "headers", "sessionId", "protocol", "required", "insecure",
	"connect_timeout", "request_timeout", "ping_interval", "tools", "resources", "prompts", "transform", "lease", "lease_reminder",
	"auth",
}

// Defaults applied to a server when its config leaves them out.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultRequestTimeout = 60 * time.Second
	// DefaultPingInterval is how often a shared instance's health is checked.
	DefaultPingInterval = 30 * time.Second
)

var serverIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// ReservedServerID is the id under which the aggregator lists its own admin tools. A
// configured server may not use it: its tools would be taken for the admin tools.
const ReservedServerID = "mcp_admin"

// serverDef is one server definition as read from one file, before workspace-wide
// settings (admin defaults, allowed commands, naming pattern) are applied.
type serverDef struct {
	srv              *Server
	problems         problemList
	leaseReminderSet bool
	commandLine      int  // line of command, for the allowed_commands check
	commandFromEnv   bool // command came from the environment: do not echo it
	authLine         int  // line of auth, for checks against the workspace
	headersLine      int  // line of headers, likewise
}

// fileContext is what a server definition needs to know about the file it is in.
type fileContext struct {
	file      string // as given by the caller
	dir       string // absolute directory of the file
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)
	dialect   Dialect // the file's format; a fix that needs a native key says how to get one
	json      bool    // the file is JSON, where a fix is written in JSON
}

// parseServer reads one entry of the servers mapping.
func parseServer(fc fileContext, id string, key, n *yaml.Node) *serverDef {
	srv := &Server{
		ID:             id,
		File:           fc.file,
		Line:           key.Line,
		Cwd:            fc.dir,
		Protocol:       "auto",
		ConnectTimeout: DefaultConnectTimeout,
		RequestTimeout: DefaultRequestTimeout,
		PingInterval:   DefaultPingInterval,
		Lease:          Lease{MaxInstances: DefaultLeaseMaxInstances},
		LeaseReminder:  true,
		Tools:          Tools{Mode: ModeDynamic},
	}
	d := &serverDef{srv: srv}
	var hostVars []string
	fc.lookupEnv = recordingLookup(fc.lookupEnv, &hostVars) // an env_file's variables are not the host's: see loadEnvFile
	r := &reader{problemList: problemList{file: fc.file, server: id}, lookup: fc.lookupEnv}
	defer func() {
		d.problems = r.problemList
		srv.FromEnv = distinct(r.taken)
		srv.HostVars = distinct(hostVars)
	}()

	if !serverIDPattern.MatchString(id) {
		r.errorf(key.Line, "", "server id must be 1 to 64 letters, digits, '.', '_' or '-'; rename it")
	} else if id == ReservedServerID {
		r.errorf(key.Line, "", "server id %q is reserved for the aggregator's own admin tools; rename the server, e.g. to %q", id, id+"-2")
	}
	if !isMapping(n) {
		r.errorf(n.Line, "", "a server must be a mapping of settings; add command: (stdio) or url: (streamable_http, sse)")
		return d
	}
	f := r.fields(n, "", serverKeys...)

	// env_file comes first: its variables feed every ${VAR} and {env: NAME} below.
	if p, ok := f["env_file"]; ok {
		r.loadEnvFile(fc, p.v)
	}
	s := serverReader{reader: r, f: f, srv: srv, foreign: fc.dialect != "" && fc.dialect != DialectNative}
	s.scalars(fc)
	s.maps()
	s.tools()
	s.filters()
	s.transforms()
	s.lease()
	d.leaseReminderSet = s.has("lease_reminder")
	if c, ok := f["command"]; ok {
		d.commandLine = c.v.Line
		d.commandFromEnv = s.commandFromEnv
	}
	s.auth()
	if p, ok := f["auth"]; ok {
		d.authLine = p.k.Line
	}
	if p, ok := f["headers"]; ok {
		d.headersLine = p.k.Line
	}
	s.checkTransport()
	s.checkAuth()
	return d
}

// loadEnvFile reads the server's env_file and puts its variables in front of the host
// environment for every later lookup.
func (r *reader) loadEnvFile(fc fileContext, n *yaml.Node) {
	t, ok := r.text(n, "env_file")
	if !ok || t.s == "" {
		return
	}
	r.envFile = t.quoted()
	path := t.s
	if !filepath.IsAbs(path) {
		path = filepath.Join(fc.dir, path)
	}
	shown := t.quoted()
	data, err := fc.readFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.envErrorf(n.Line, "env_file", "file %s does not exist (paths are relative to the config file's directory); create it or fix the path", shown)
		return
	case err != nil:
		r.errorf(n.Line, "env_file", "cannot read %s (%v); make it a readable regular file", shown, errorCause(err))
		return
	}
	vars, bad := parseDotenv(data)
	for _, line := range bad {
		r.warnf(n.Line, "env_file", "line %d of %s is not KEY=VALUE; it is ignored", line, shown)
	}
	host := fc.lookupEnv
	r.lookup = func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		return host(name)
	}
}

// serverReader fills one Server from its indexed fields.
type serverReader struct {
	*reader
	f              map[string]pair
	srv            *Server
	commandFromEnv bool
	cwd            *text // cwd as written (after ${VAR} expansion), if the config sets one
	foreign        bool  // read from another client's config, which has no key for some settings
}

func (s *serverReader) has(key string) bool { _, ok := s.f[key]; return ok }

func (s *serverReader) node(key string) *yaml.Node { return s.f[key].v }

// scalars reads the single-valued settings.
func (s *serverReader) scalars(fc fileContext) {
	srv := s.srv
	if p, ok := s.f["truely-stateless"]; ok {
		srv.Stateless, _ = s.boolean(p.v, "truely-stateless")
	}
	if p, ok := s.f["command"]; ok {
		if t, ok := s.text(p.v, "command"); ok {
			srv.Command, s.commandFromEnv = t.s, t.fromEnv
		}
	}
	if p, ok := s.f["args"]; ok {
		items, _ := s.list(p.v, "args")
		for _, t := range items {
			srv.Args = append(srv.Args, t.s)
		}
		s.warnSecretArgs(p.v)
	}
	if p, ok := s.f["cwd"]; ok {
		if t, ok := s.text(p.v, "cwd"); ok && t.s != "" {
			s.cwd = &t
			srv.Cwd = t.s
			if !filepath.IsAbs(t.s) {
				srv.Cwd = filepath.Join(fc.dir, t.s)
			}
			srv.Cwd = filepath.Clean(srv.Cwd)
		}
	}
	if p, ok := s.f["url"]; ok {
		if t, ok := s.text(p.v, "url"); ok {
			srv.URL = t.s
			s.noteTaken(urlPathFromEnv(t)...)
		}
	}
	if p, ok := s.f["sessionId"]; ok {
		if t, ok := s.text(p.v, "sessionId"); ok {
			srv.SessionID = t.s
		}
	}
	if p, ok := s.f["protocol"]; ok {
		if t, ok := s.text(p.v, "protocol"); ok {
			if _, err := time.Parse("2006-01-02", t.s); t.s != "auto" && err != nil {
				s.errorf(p.v.Line, "protocol", "%s is not a protocol version; use auto or a dated MCP version such as 2025-11-25", t.quoted())
			} else {
				srv.Protocol = t.s
			}
		}
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"required", &srv.Required}, {"insecure", &srv.Insecure}, {"lease_reminder", &srv.LeaseReminder}} {
		if p, ok := s.f[b.key]; ok {
			if v, ok := s.boolean(p.v, b.key); ok {
				*b.dst = v
			}
		}
	}
	if p, ok := s.f["ping_interval"]; ok {
		if d, ok := s.duration(p.v, "ping_interval"); ok {
			srv.PingInterval = d // 0 turns pings off
		}
	}
	for _, t := range []struct {
		key string
		dst *time.Duration
	}{{"connect_timeout", &srv.ConnectTimeout}, {"request_timeout", &srv.RequestTimeout}} {
		if p, ok := s.f[t.key]; ok {
			if d, ok := s.duration(p.v, t.key); ok {
				if d == 0 {
					s.errorf(p.v.Line, t.key, "must be greater than zero; leave it out for the default")
					continue
				}
				*t.dst = d
			}
		}
	}
}

// maps reads env and headers.
func (s *serverReader) maps() {
	if p, ok := s.f["env"]; ok {
		s.srv.Env = s.values(p.v, "env", validEnvName, "an environment variable name (no '=')")
	}
	if p, ok := s.f["headers"]; ok {
		s.srv.Headers = s.values(p.v, "headers", validHeaderName, "an HTTP header name")
	}
	s.inheritEnv()
}

// values reads a mapping of names to literal strings or {env: NAME} references.
func (s *serverReader) values(n *yaml.Node, field string, validName func(string) bool, nameRule string) map[string]string {
	form := "NAME: value or NAME: {env: HOST_VAR}"
	if field == "headers" {
		form += " or NAME: {principal: subject}"
	}
	if !s.mapping(n, field, form) || isNull(n) {
		return nil
	}
	own, merged := mappingPairs(n)
	out := make(map[string]string, len(own)+len(merged))
	for _, p := range append(own, merged...) {
		sub := field + "." + p.key
		if _, dup := out[p.key]; dup || (field == "headers" && s.srv.PrincipalHeaders[p.key] != "") {
			s.errorf(p.k.Line, sub, "set more than once; keep one")
			continue
		}
		if !validName(p.key) {
			s.errorf(p.k.Line, sub, "%q is not %s; rename it", safeName(p.key), nameRule)
			continue
		}
		v := deref(p.v)
		switch {
		case isNull(v):
			out[p.key] = ""
		case field == "headers" && isPrincipalRef(v):
			if what, ok := s.principalRef(v, sub); ok {
				if s.srv.PrincipalHeaders == nil {
					s.srv.PrincipalHeaders = map[string]string{}
				}
				s.srv.PrincipalHeaders[p.key] = what
			}
			continue
		case v.Kind == yaml.MappingNode:
			if val, ok := s.envRef(v, sub); ok {
				out[p.key] = val
			}
		default:
			if t, ok := s.text(v, sub); ok {
				out[p.key] = t.s
			}
		}
		if field == "headers" && containsLineBreak(out[p.key]) {
			s.errorf(p.k.Line, sub, "value contains a line break, which an HTTP header cannot carry; remove it")
		}
	}
	return out
}

// envRef resolves {env: NAME}: a copy of a variable from env_file or the host.
func (s *serverReader) envRef(n *yaml.Node, field string) (string, bool) {
	f := s.fields(n, field+".", "env")
	p, ok := f["env"]
	if !ok {
		s.errorf(n.Line, field, "a mapping value must be {env: HOST_VAR}; write a string for a literal value")
		return "", false
	}
	v := deref(p.v)
	if v == nil || v.Kind != yaml.ScalarNode || !varName.MatchString(v.Value) {
		s.errorf(p.v.Line, field, "env: must name a variable (letters, digits and _), e.g. {env: GITHUB_TOKEN}")
		return "", false
	}
	val, ok := s.lookup(v.Value)
	if !ok {
		s.envErrorf(p.v.Line, field, "host variable %s is not set; export it or %s", v.Value, s.envFileHint())
		return "", false
	}
	s.noteTaken(val)
	return val, true
}

// recordingLookup is lookup that notes in names every variable it finds set,
// empty or not.
func recordingLookup(lookup func(string) (string, bool), names *[]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if ok {
			*names = append(*names, name)
		}
		return v, ok
	}
}

// warnSecretArgs warns about each argument that ${VAR} fills with a secret (a
// variable named like one, set and not empty): a process's command line is
// readable by every user of the machine (ps, /proc/PID/cmdline), its
// environment only by its owner.
func (s *serverReader) warnSecretArgs(n *yaml.Node) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode || s.lookup == nil {
		return
	}
	for i, item := range n.Content {
		if item = deref(item); item.Kind != yaml.ScalarNode {
			continue
		}
		var set []string
		_, _ = interpolate(item.Value, func(name string) (string, bool) {
			v, ok := s.lookup(name)
			if ok && v != "" {
				set = append(set, name)
			}
			return v, ok
		})
		for _, name := range distinct(set) {
			if SecretName(name) {
				s.warnf(item.Line, fmt.Sprintf("args[%d]", i), "${%s} puts a secret on the server's command line, which every user of this "+
					"machine can read (ps, /proc); pass it in env instead if the server reads it there", name)
			}
		}
	}
}
