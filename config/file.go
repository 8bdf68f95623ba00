package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// topKeys are the keys a config file may have at its top level.
var topKeys = []string{"version", "servers", "limits", "security", "naming", "admin", "http", "discovery", "cache", "profiles", "oauth", "policy", "audit", "rate_limits", "views"}

// SupportedVersion is the only config version this build reads.
const SupportedVersion = 1

// fileResult is what one config file contributes to the workspace.
type fileResult struct {
	problems problemList // workspace-level problems
	servers  []*serverDef
	hostVars []string // host variables the workspace settings read (http.auth tokens)
	settings settings
	dialect  Dialect // the shape the file was read as; "" when it could not be read
}

// settings are the workspace-wide values one file sets; nil means "not set here".
type settings struct {
	audit           Audit // the audit log (config/audit.go)
	auditSet        bool
	rateLimits      RateLimits // config/ratelimits.go
	rateLimitsSet   bool
	views           map[string]View // config/views.go
	viewLines       map[string]int
	viewsSet        bool
	maxConcurrent   *int
	allowedCommands []string
	commandsSet     bool
	validPattern    *string
	adminEnabled    *bool
	leaseReminder   *bool
	allowedOrigins  []string
	originsSet      bool
	maxBodyBytes    *int
	maxBatchBytes   *int
	maxInstances    *int
	maxRSS          *int64
	cacheMaxBytes   *int64
	discoveryMode   *DiscoveryMode
	always          []string
	alwaysSet       bool
	access          access       // http.auth and profiles (config/auth.go)
	oauth           *OAuthClient // the oauth section (config/clientid.go)
}

// parseFile reads one config file of any dialect. A workspace-level error leaves
// result.problems with an error; server-level problems stay with each serverDef.
func parseFile(fc fileContext, data []byte) (res fileResult) {
	r := &reader{problemList: problemList{file: fc.file}}
	defer func() { res.problems = r.problemList }()

	root, isJSON, ok := decodeDocument(r, data)
	if !ok {
		return res
	}
	d, unknown := detectDialect(root, isJSON)
	if unknown {
		unknownShape(r, root)
		return res
	}
	res.dialect = d
	fc.dialect, fc.json = d, isJSON
	if d == DialectNative {
		parseNative(r, fc, root, &res)
		return res
	}
	t := translate(d, fc, root)
	r.problems = append(r.problems, t.problems.problems...)
	res.settings = readSettings(r, r.fields(t.root, "", topKeys...))
	res.servers = readServers(r, fc, t.servers)
	for _, def := range res.servers {
		n := t.notes[def.srv.ID]
		if n == nil {
			continue
		}
		for i := range def.problems.problems {
			def.problems.problems[i].Field = n.rename(def.problems.problems[i].Field)
		}
		def.problems.problems = append(n.problems, def.problems.problems...)
	}
	return res
}

// translate rewrites a dialect file as a native document.
func translate(d Dialect, fc fileContext, root *yaml.Node) *translation {
	switch d {
	case DialectHoloDeck:
		return translateHoloDeck(fc, root)
	case DialectChatagent:
		return translateChatagent(fc, root)
	default:
		return translateClients(d, fc, root)
	}
}

// decodeDocument parses a file as JSON when it is a JSON object, else as YAML, and
// reports a syntax error on the line it is on. ok is false when there is nothing to read.
func decodeDocument(r *reader, data []byte) (root *yaml.Node, isJSON, ok bool) {
	if len(data) > MaxFileSize {
		r.errorf(0, "", "%s", tooLarge(int64(len(data))))
		return nil, false, false
	}
	if looksLikeJSON(data) {
		n, err := decodeJSON(data)
		if err != nil {
			line, msg := 0, err.Error()
			var se *syntaxError
			if errors.As(err, &se) {
				line, msg = se.line, se.msg
			}
			r.errorf(line, "", "invalid JSON: %s; fix the syntax on that line", msg)
			return nil, true, false
		}
		return n, true, true
	}
	doc, err := decodeYAML(data)
	if err != nil {
		line, msg := yamlSyntaxError(data, err)
		fix := "fix the syntax on that line"
		if tabIndented(data, line) {
			fix = "indent that line with spaces: YAML does not allow tabs in indentation"
		}
		r.errorf(line, "", "invalid YAML: %s; %s", msg, fix)
		return nil, false, false
	}
	if doc.more {
		r.warnf(doc.moreLine, "", "only the first YAML document is read; remove the '---' and what follows, or merge it into the first")
	}
	if doc.node == nil || isNull(doc.node) {
		r.errorf(0, "version", "the file is empty; start it with version: %d and a servers: mapping", SupportedVersion)
		return nil, false, false
	}
	return doc.node, false, true
}

// parseNative reads a native config document.
func parseNative(r *reader, fc fileContext, root *yaml.Node, res *fileResult) {
	if !isMapping(root) {
		r.errorf(root.Line, "", "the top level must be a mapping with version: %d and servers:", SupportedVersion)
		return
	}
	f := r.fields(root, "", topKeys...)

	if p, ok := f["version"]; !ok {
		if keys := ownKeys(root, 3); fc.json && len(keys) > 0 {
			r.errorf(root.Line, "version", "required: the file uses keys of mcp-aggregator's own config (%s), so it is read as one, not as a VS Code or TENEX mcp.json; "+
				"add \"version\": %d to its top-level object", strings.Join(keys, ", "), SupportedVersion)
		} else {
			r.errorf(root.Line, "version", "required; add version: %d at the top of the file", SupportedVersion)
		}
	} else if v := deref(p.v); v.Kind != yaml.ScalarNode || v.Value != strconv.Itoa(SupportedVersion) {
		r.errorf(p.v.Line, "version", "version %s is not supported; this build reads version: %d", safeName(v.Value), SupportedVersion)
	}
	res.settings = readSettings(r, f)
	res.settings.access = readAccess(r, recordingLookup(fc.lookupEnv, &res.hostVars), f)
	if p, ok := f["views"]; ok {
		res.settings.views, res.settings.viewLines = readViews(r, p.v)
		res.settings.viewsSet = true
	}
	if p, ok := f["rate_limits"]; ok {
		res.settings.rateLimits, res.settings.rateLimitsSet = readRateLimits(r, p.v), true
	}
	if p, ok := f["audit"]; ok {
		res.settings.audit, res.settings.auditSet = readAudit(r, p.v, fc.dir)
	}
	if p, ok := f["servers"]; ok {
		res.servers = readServers(r, fc, p.v)
	}
}

// document is the first YAML document of a file.
type document struct {
	node     *yaml.Node
	more     bool // further documents follow
	moreLine int
}

// decodeYAML parses the first document into a node tree. The parser is third-party code
// fed untrusted text, so a panic in it is reported as invalid YAML rather than crashing.
func decodeYAML(data []byte) (doc document, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the YAML parser failed: %v", v)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return document{}, nil
		}
		return document{}, err
	}
	if len(n.Content) > 0 {
		doc.node = n.Content[0]
	}
	var next yaml.Node
	if dec.Decode(&next) == nil {
		doc.more, doc.moreLine = true, next.Line
	}
	return doc, nil
}

// readSettings reads limits, security, naming, admin, http and discovery.
func readSettings(r *reader, f map[string]pair) settings {
	var s settings
	section := func(key, want string, known ...string) map[string]pair {
		p, ok := f[key]
		if !ok || !r.mapping(p.v, key, want) {
			return nil
		}
		return r.fields(p.v, key+".", known...)
	}
	if f := section("limits", strings.Join(limitKeys, ", "), limitKeys...); f != nil {
		readLimits(r, f, &s)
	}
	if f := section("cache", "max_bytes", "max_bytes"); f != nil {
		if p, ok := f["max_bytes"]; ok {
			if v, ok := r.size(p.v, "cache.max_bytes"); ok {
				s.cacheMaxBytes = &v
			}
		}
	}
	if f := section("security", "allowed_commands", "allowed_commands"); f != nil {
		if p, ok := f["allowed_commands"]; ok {
			s.allowedCommands, s.commandsSet = r.strings(p.v, "security.allowed_commands"), true
		}
	}
	if f := section("naming", "valid_pattern", "valid_pattern"); f != nil {
		if p, ok := f["valid_pattern"]; ok {
			if t, ok := r.text(p.v, "naming.valid_pattern"); ok {
				if _, err := regexp.Compile(t.s); err != nil {
					r.errorf(p.v.Line, "naming.valid_pattern", "not a valid regular expression (%v); fix it or remove it to use %s", err, DefaultValidPattern)
				} else {
					s.validPattern = &t.s
				}
			}
		}
	}
	if f := section("admin", "enabled, lease_reminder", "enabled", "lease_reminder"); f != nil {
		for _, b := range []struct {
			key string
			dst **bool
		}{{"enabled", &s.adminEnabled}, {"lease_reminder", &s.leaseReminder}} {
			if p, ok := f[b.key]; ok {
				if v, ok := r.boolean(p.v, "admin."+b.key); ok {
					*b.dst = &v
				}
			}
		}
	}
	if f := section("http", "allowed_origins, max_body_bytes, max_batch_bytes, auth", "allowed_origins", "max_body_bytes", "max_batch_bytes", "auth"); f != nil {
		if p, ok := f["allowed_origins"]; ok {
			s.allowedOrigins, s.originsSet = r.strings(p.v, "http.allowed_origins"), true
			for _, o := range s.allowedOrigins {
				if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
					r.errorf(p.v.Line, "http.allowed_origins", "%q is not an origin; write scheme://host[:port], e.g. https://app.example.com", o)
				}
			}
		}
		if p, ok := f["max_body_bytes"]; ok {
			if v, ok := r.count(p.v, "http.max_body_bytes"); ok {
				if v < 1024 {
					r.errorf(p.v.Line, "http.max_body_bytes", "%d is too small for any MCP request; use at least 1024 (default %d)", v, DefaultMaxBodyBytes)
				} else {
					s.maxBodyBytes = &v
				}
			}
		}
		if p, ok := f["max_batch_bytes"]; ok {
			if v, ok := r.count(p.v, "http.max_batch_bytes"); ok {
				if v < 1024 {
					r.errorf(p.v.Line, "http.max_batch_bytes", "%d is too small for the answers to any batch; use at least 1024 (default %d)", v, DefaultMaxBatchBytes)
				} else {
					s.maxBatchBytes = &v
				}
			}
		}
	}
	if f := section("discovery", "mode, always", "mode", "always"); f != nil {
		readDiscovery(r, f, &s)
	}
	if p, ok := f["oauth"]; ok {
		s.oauth = readOAuthSection(r, p.v)
	}
	return s
}

// readDiscovery reads discovery.mode and discovery.always.
func readDiscovery(r *reader, f map[string]pair, s *settings) {
	if p, ok := f["mode"]; ok {
		if t, ok := r.text(p.v, "discovery.mode"); ok {
			switch m := DiscoveryMode(t.s); m {
			case DiscoveryAll, DiscoverySearch:
				s.discoveryMode = &m
			default:
				hint := ""
				if c := closest(t.s, []string{string(DiscoveryAll), string(DiscoverySearch)}); c != "" {
					hint = fmt.Sprintf("did you mean %q? ", c)
				}
				r.errorf(p.v.Line, "discovery.mode", "%s is not a discovery mode; %suse all (every tool in tools/list, the default) or search (mcp_search_tools and mcp_call_tool in front of the catalog)", t.quoted(), hint)
			}
		}
	}
	if p, ok := f["always"]; ok {
		items, _ := r.list(p.v, "discovery.always")
		s.alwaysSet = true
		for i, t := range items {
			field := fmt.Sprintf("discovery.always[%d]", i)
			switch {
			case t.s == "":
				r.errorf(p.v.Line, field, "empty pattern; write an exported tool name, * matches any run of characters (e.g. fs_read_*)")
			case strings.Trim(t.s, "*") == "":
				r.warnf(p.v.Line, field, "%s matches every tool, so search mode keeps nothing out of tools/list; name the tools to keep listed, or use mode: all", t.quoted())
				s.always = append(s.always, t.s)
			default:
				s.always = append(s.always, t.s)
			}
		}
	}
}

// readServers reads the servers mapping. A server id used twice in one file is a
// workspace-level error: there is no telling which definition was meant.
func readServers(r *reader, fc fileContext, n *yaml.Node) []*serverDef {
	if !r.mapping(n, "servers", "server id: settings") || isNull(n) {
		return nil
	}
	if tooManyServers(r, n) {
		return nil
	}
	own, merged := mappingPairs(n)
	firstLine := map[string]int{}
	var defs []*serverDef
	for _, p := range append(own, merged...) {
		if line, dup := firstLine[p.key]; dup {
			r.errorf(p.k.Line, "servers."+p.key, "server id %q is already defined on line %d of this file; rename or remove one of them", safeName(p.key), line)
			continue
		}
		firstLine[p.key] = p.k.Line
		defs = append(defs, parseServer(fc, p.key, p.k, p.v))
	}
	return defs
}
