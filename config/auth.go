package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/policy"
	"gopkg.in/yaml.v3"
)

type (
	// Auth is http.auth: who may use the HTTP gateway. Static tokens and
	// OAuth may be set together; a request passes with either.
	Auth struct {
		// Tokens maps a client's name to its bearer token (a secret value,
		// resolved from the environment).
		Tokens map[string]string
		// OAuth makes the gateway an OAuth 2.1 resource server; nil when not set.
		OAuth *OAuth
		// Operators are the clients (names as in Tokens, or OAuth clients)
		// that may use the operator endpoints, such as POST /drain.
		Operators []string
		// UserLogins keeps the logins of servers with auth.per_user; nil
		// when not set.
		UserLogins *UserLogins
	}

	// OAuth is http.auth.oauth: JWT access tokens issued by one authorization server.
	OAuth struct {
		Issuer         string   // the authorization server; its metadata gives jwks_uri
		Audience       string   // a token's aud must contain it
		RequiredScopes []string // every one must be in the token's scope
	}

	// Profile is what one client may see and call. Empty lists do not restrict.
	Profile struct {
		Servers []string // server ids whose tools, resources and prompts the client sees
		Tools   []string // patterns (* wildcards) on exported tool names
		// Match chooses the principals the profile is for by who they are
		// rather than by client; the zero Match: the client the profile is
		// named after.
		Match ProfileMatch
		// Line is where a profile with a Match is named in its file (0
		// without one); it orders the profiles chosen by a claim (the first
		// in the file wins).
		Line int
	}

	// ProfileMatch is a profile's match: exactly one of Subject, or Claim
	// with Value.
	ProfileMatch struct {
		Subject string // an OAuth access token's sub
		Claim   string // a claim's name; the claim is Value, or a list holding it
		Value   string
	}
)

// Enabled reports whether a is set at all.
func (a Auth) Enabled() bool { return len(a.Tokens) > 0 || a.OAuth != nil }

// clientNamePattern is what a static token's client name may be: it shows in
// logs and lease keys, so it stays short and plain.
var clientNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.@-]{1,64}$`)

// minTokenLength is the length under which a static token is called weak.
const minTokenLength = 16

// access is what http.auth and profiles of one file say, before the
// workspace's servers are known.
type access struct {
	auth         *Auth // nil: not set in this file
	profiles     map[string]Profile
	profilesSet  bool
	profileLines map[string]int
	policy       *policy.Set // the compiled policy list, nil for none
	policyRules  []policy.Rule
	policySet    bool
}

// readAccess reads http.auth and profiles from a native document's top-level
// fields. Token references resolve with lookupEnv (the host environment).
func readAccess(r *reader, lookupEnv func(string) (string, bool), f map[string]pair) access {
	var a access
	if p, ok := f["http"]; ok && isMapping(deref(p.v)) {
		if n := member(deref(p.v), "auth"); n != nil {
			a.auth = readAuth(r, lookupEnv, n)
		}
	}
	if p, ok := f["profiles"]; ok {
		a.profiles, a.profileLines = readProfiles(r, p.v)
		a.profilesSet = true
	}
	if p, ok := f["policy"]; ok {
		a.policy, a.policyRules = readPolicy(r, p.v)
		a.policySet = true
	}
	return a
}

// member returns the value of key in a mapping, or nil.
func member(n *yaml.Node, key string) *yaml.Node {
	own, merged := mappingPairs(n)
	for _, p := range append(own, merged...) {
		if p.key == key {
			return p.v
		}
	}
	return nil
}

// readAuth reads http.auth. Token values never appear in a problem.
func readAuth(r *reader, lookupEnv func(string) (string, bool), n *yaml.Node) *Auth {
	const want = "tokens: {CLIENT: {env: VAR}}, oauth: {issuer, audience, required_scopes}, operators: [CLIENT], user_logins: {key, callback}"
	if !r.mapping(n, "http.auth", want) {
		return nil
	}
	a := &Auth{}
	if isNull(n) {
		r.errorf(n.Line, "http.auth", "is empty; set tokens (static bearer tokens per client) or oauth (JWT access tokens), or remove http.auth")
		return a
	}
	f := r.fields(n, "http.auth.", "tokens", "oauth", "operators", "user_logins")
	before := len(r.problems)
	if p, ok := f["tokens"]; ok {
		a.Tokens = readTokens(r, lookupEnv, p.v)
	}
	if p, ok := f["oauth"]; ok {
		a.OAuth = readOAuth(r, p.v)
	}
	if p, ok := f["user_logins"]; ok {
		a.UserLogins = readUserLogins(r, lookupEnv, p.v, a.OAuth)
	}
	if p, ok := f["operators"]; ok {
		// The clients written under tokens, also those whose token could
		// not be read (a variable not set): their problem is said there.
		var written map[string]bool
		if t, ok := f["tokens"]; ok && t.v != nil && t.v.Kind == yaml.MappingNode {
			written = map[string]bool{}
			own, merged := mappingPairs(t.v)
			for _, pr := range append(own, merged...) {
				written[pr.key] = true
			}
		}
		a.Operators = readOperators(r, p.v, a, written)
	}
	if !a.Enabled() && !HasErrors(r.problems[before:]) {
		// An empty tokens mapping must not pass for authentication.
		r.errorf(n.Line, "http.auth", "sets neither a token nor oauth; add tokens: {CLIENT: {env: VAR}} or oauth, or remove http.auth")
	}
	return a
}

// readTokens reads http.auth.tokens: client name -> {env: VAR} (or a
// literal, with a warning: a config file is no place for a secret).
func readTokens(r *reader, lookupEnv func(string) (string, bool), n *yaml.Node) map[string]string {
	if !r.mapping(n, "http.auth.tokens", "CLIENT: {env: VAR}") || isNull(n) {
		return nil
	}
	own, merged := mappingPairs(n)
	out := map[string]string{}
	owner := map[string]string{} // token -> client, to find a token given twice
	for _, p := range append(own, merged...) {
		field := "http.auth.tokens." + p.key
		if _, dup := out[p.key]; dup {
			r.errorf(p.k.Line, field, "client set more than once; keep one")
			continue
		}
		if !clientNamePattern.MatchString(p.key) {
			r.errorf(p.k.Line, field, "%q is not a client name; use 1 to 64 letters, digits, '.', '_', '@' or '-'", safeName(p.key))
			continue
		}
		token, ok := tokenValue(r, lookupEnv, p.v, field)
		if !ok {
			continue
		}
		switch {
		case strings.TrimSpace(token) == "":
			r.errorf(p.v.Line, field, "the token is empty; set the variable to a long random value, e.g. the output of: openssl rand -hex 32")
			continue
		case strings.ContainsAny(token, " \t\r\n"):
			r.errorf(p.v.Line, field, "the token contains white space, which a bearer token cannot carry; generate one with: openssl rand -hex 32")
			continue
		case !token68(token):
			r.errorf(p.v.Line, field, "the token has characters a bearer token cannot carry (RFC 6750 allows letters, digits, '-', '.', '_', '~', '+', '/' and '=' at the end), so no client could send it; generate one with: openssl rand -hex 32")
			continue
		case len(token) < minTokenLength:
			r.warnf(p.v.Line, field, "the token is shorter than %d characters and easy to guess; use a long random value, e.g. the output of: openssl rand -hex 32", minTokenLength)
		}
		if other, dup := owner[token]; dup {
			r.errorf(p.v.Line, field, "has the same token as client %q, so the two cannot be told apart; give each client its own token", other)
			continue
		}
		owner[token] = p.key
		out[p.key] = token
	}
	return out
}

// token68 reports whether s has the syntax of a bearer token (RFC 6750
// §2.1, RFC 7235 token68): the gateway refuses any other as malformed.
func token68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// tokenValue resolves one token: {env: VAR}, or a string (with ${VAR}
// expanded from the host).
func tokenValue(r *reader, lookupEnv func(string) (string, bool), n *yaml.Node, field string) (string, bool) {
	v := deref(n)
	if isNull(v) {
		r.errorf(n.Line, field, "no token; write {env: VAR} naming the variable that holds it")
		return "", false
	}
	if v.Kind == yaml.MappingNode {
		f := r.fields(v, field+".", "env")
		p, ok := f["env"]
		ref := deref(p.v)
		if !ok || ref == nil || ref.Kind != yaml.ScalarNode || !varName.MatchString(ref.Value) {
			r.errorf(v.Line, field, "must be {env: VAR} with a variable name (letters, digits and _), e.g. {env: CI_BOT_TOKEN}")
			return "", false
		}
		val, set := lookupEnv(ref.Value)
		if !set {
			r.envErrorf(ref.Line, field, "host variable %s is not set; export it before starting the gateway", ref.Value)
			return "", false
		}
		return val, true
	}
	if v.Kind != yaml.ScalarNode {
		r.errorf(v.Line, field, "must be {env: VAR}, not a %s", kindName(v))
		return "", false
	}
	x, err := interpolate(v.Value, lookupEnv)
	if err != nil {
		r.errorf(v.Line, field, "%v", err)
		return "", false
	}
	if len(x.missing) > 0 {
		r.envErrorf(v.Line, field, "variable %s is not set; export it before starting the gateway", x.missing[0])
		return "", false
	}
	if !x.fromEnv {
		r.warnf(v.Line, field, "the token is written in the config file; keep it in the environment and write {env: VAR} instead")
	}
	return x.value, true
}

// readOperators reads http.auth.operators: names of clients that a token
// or OAuth authenticates. A name no static token has, while OAuth is not
// set, could never match and is an error.
func readOperators(r *reader, n *yaml.Node, a *Auth, written map[string]bool) []string {
	items, _ := r.list(n, "http.auth.operators")
	var out []string
	for i, t := range items {
		field := fmt.Sprintf("http.auth.operators[%d]", i)
		_, isToken := a.Tokens[t.s]
		isToken = isToken || written[t.s]
		switch {
		case !clientNamePattern.MatchString(t.s) && a.OAuth == nil:
			r.errorf(deref(n).Line, field, "%q is not a client name; use 1 to 64 letters, digits, '.', '_', '@' or '-', as in http.auth.tokens", safeName(t.s))
		case strings.TrimSpace(t.s) == "" || len(t.s) > 256:
			r.errorf(deref(n).Line, field, "is not a client name; write the name a token or an OAuth access token authenticates")
		case !isToken && a.OAuth == nil:
			r.errorf(deref(n).Line, field, "%q is no client of http.auth.tokens, so it could never drain this gateway; add its token there or fix the name", t.s)
		case !slices.Contains(out, t.s):
			out = append(out, t.s)
		}
	}
	return out
}

// readOAuth reads http.auth.oauth.
func readOAuth(r *reader, n *yaml.Node) *OAuth {
	if !r.mapping(n, "http.auth.oauth", "issuer, audience, required_scopes") {
		return nil
	}
	o := &OAuth{}
	line := deref(n).Line
	f := r.fields(n, "http.auth.oauth.", "issuer", "audience", "required_scopes")
	if p, ok := f["issuer"]; ok {
		if t, ok := r.text(p.v, "http.auth.oauth.issuer"); ok {
			o.Issuer = strings.TrimSpace(t.s)
			checkIssuer(r, o.Issuer, p.v.Line)
		}
	}
	if o.Issuer == "" {
		r.errorf(line, "http.auth.oauth.issuer", "required; set it to the authorization server's issuer URL, e.g. https://auth.example.com (its /.well-known metadata gives the keys)")
	}
	if p, ok := f["audience"]; ok {
		if t, ok := r.text(p.v, "http.auth.oauth.audience"); ok {
			o.Audience = strings.TrimSpace(t.s)
		}
	}
	if o.Audience == "" {
		r.errorf(line, "http.auth.oauth.audience", "required; set it to this gateway's resource identifier, the aud its tokens carry, e.g. https://gateway.example.com/mcp")
	}
	if p, ok := f["required_scopes"]; ok {
		items, _ := r.list(p.v, "http.auth.oauth.required_scopes")
		for i, t := range items {
			field := fmt.Sprintf("http.auth.oauth.required_scopes[%d]", i)
			if t.s == "" || strings.ContainsAny(t.s, " \t\r\n\"\\") {
				r.errorf(p.v.Line, field, "%s is not a scope; a scope is one word without spaces or quotes, e.g. mcp", t.quoted())
				continue
			}
			if !slices.Contains(o.RequiredScopes, t.s) {
				o.RequiredScopes = append(o.RequiredScopes, t.s)
			}
		}
	}
	return o
}

// checkIssuer requires an https URL (http only on loopback) without query
// or fragment, as RFC 8414 defines an issuer identifier.
func checkIssuer(r *reader, issuer string, line int) {
	u, err := url.Parse(issuer)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		r.errorf(line, "http.auth.oauth.issuer", "%q is not an https URL; write the issuer as the authorization server publishes it, e.g. https://auth.example.com", issuer)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		r.errorf(line, "http.auth.oauth.issuer", "%q uses plain http to a non-loopback host, so its signing keys could be forged in transit; use https", issuer)
	case u.RawQuery != "" || u.Fragment != "":
		r.errorf(line, "http.auth.oauth.issuer", "%q has a query or fragment, which an issuer identifier never has (RFC 8414); remove it", issuer)
	}
}

// readProfiles reads the top-level profiles mapping.
func readProfiles(r *reader, n *yaml.Node) (map[string]Profile, map[string]int) {
	if !r.mapping(n, "profiles", "CLIENT: {servers: [...], tools: [patterns]}") || isNull(n) {
		return nil, nil
	}
	own, merged := mappingPairs(n)
	out := map[string]Profile{}
	lines := map[string]int{}
	for _, p := range append(own, merged...) {
		field := "profiles." + p.key
		if _, dup := out[p.key]; dup {
			r.errorf(p.k.Line, field, "profile set more than once; keep one")
			continue
		}
		if p.key == "" || len(p.key) > 256 {
			r.errorf(p.k.Line, field, "a profile is named after its client (the static token's key or the OAuth client_id), or chooses its principals with match:")
			continue
		}
		if !r.mapping(p.v, field, "servers: [ids], tools: [patterns], match: {subject: SUB} or {claim: NAME, value: VALUE}") {
			continue
		}
		var prof Profile
		if !isNull(p.v) {
			f := r.fields(p.v, field+".", "servers", "tools", "match")
			if m, ok := f["match"]; ok {
				prof.Match, prof.Line = readProfileMatch(r, m.v, field+".match"), p.k.Line
			}
			if s, ok := f["servers"]; ok {
				prof.Servers = r.strings(s.v, field+".servers")
				if n := deref(s.v); n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
					r.warnf(s.v.Line, field+".servers", "an empty list restricts nothing: the client sees every server; name the servers it may use, or remove the line")
				}
			}
			if t, ok := f["tools"]; ok {
				if n := deref(t.v); n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
					r.warnf(t.v.Line, field+".tools", "an empty list restricts nothing: the client may call every tool of its servers; write patterns of the tools it may call, or remove the line")
				}
				for i, pat := range r.strings(t.v, field+".tools") {
					if pat == "" {
						r.errorf(t.v.Line, fmt.Sprintf("%s.tools[%d]", field, i), "empty pattern; write an exported tool name, * matches any run of characters (e.g. github_*)")
						continue
					}
					prof.Tools = append(prof.Tools, pat)
				}
			}
		}
		out[p.key] = prof
		lines[p.key] = p.k.Line
	}
	return out, lines
}

// readProfileMatch reads a profile's match: {subject: SUB} or {claim:
// NAME, value: VALUE}.
func readProfileMatch(r *reader, n *yaml.Node, field string) ProfileMatch {
	const want = "{subject: SUB} or {claim: NAME, value: VALUE}"
	var m ProfileMatch
	if isNull(n) || !r.mapping(n, field, want) {
		if isNull(n) {
			r.errorf(n.Line, field, "is empty; write %s, or remove it to choose the profile by the client it is named after", want)
		}
		return m
	}
	f := r.fields(n, field+".", "subject", "claim", "value")
	get := func(key string) string {
		p, ok := f[key]
		if !ok {
			return ""
		}
		t, ok := r.text(p.v, field+"."+key)
		if ok && t.s == "" {
			r.errorf(p.v.Line, field+"."+key, "is empty; write %s", want)
		}
		return t.s
	}
	m.Subject, m.Claim, m.Value = get("subject"), get("claim"), get("value")
	switch {
	case m.Subject != "" && (m.Claim != "" || m.Value != ""):
		r.errorf(n.Line, field, "names a subject and a claim; a profile matches one way: write %s", want)
	case m.Subject == "" && m.Claim == "" && m.Value == "":
		r.errorf(n.Line, field, "matches nothing; write %s", want)
	case m.Subject == "" && (m.Claim == "") != (m.Value == ""):
		r.errorf(n.Line, field, "needs both claim and value (e.g. {claim: groups, value: admins}); write %s", want)
	}
	return m
}

// checkAccess checks http.auth and profiles against the whole workspace:
// every server a profile names must be defined, and a profile should
// belong to a client the gateway can recognize.
func checkAccess(ws *Workspace, file string, lines map[string]int) []Problem {
	var out []Problem
	add := func(sev Severity, client, field, format string, args ...any) {
		out = append(out, Problem{Severity: sev, File: file, Line: lines[client], Field: field, Message: fmt.Sprintf(format, args...)})
	}
	known := map[string]bool{}
	for _, s := range ws.Servers {
		known[s.ID] = true
	}
	for _, id := range ws.Rejected {
		known[id] = true
	}
	ids := make([]string, 0, len(known))
	for id := range known {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	clients := make([]string, 0, len(ws.Profiles))
	for c := range ws.Profiles {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		prof := ws.Profiles[c]
		for i, id := range prof.Servers {
			if known[id] {
				continue
			}
			hint := ""
			if near := closest(id, ids); near != "" {
				hint = fmt.Sprintf("did you mean %q? ", near)
			}
			add(SeverityError, c, fmt.Sprintf("profiles.%s.servers[%d]", c, i), "no server %q is defined; %sname a server of the config (%s)", id, hint, strings.Join(ids, ", "))
		}
		_, hasToken := ws.HTTP.Auth.Tokens[c]
		switch {
		case prof.Match != (ProfileMatch{}) && ws.HTTP.Auth.OAuth == nil:
			add(SeverityWarning, c, "profiles."+c+".match", "matches OAuth access tokens, and http.auth.oauth is not set, so the profile never applies")
		case prof.Match != (ProfileMatch{}):
		case !ws.HTTP.Auth.Enabled():
			add(SeverityWarning, c, "profiles."+c, "applies only to clients that authenticate, and http.auth is not set; every client sees everything until it is")
		case !hasToken && ws.HTTP.Auth.OAuth == nil:
			add(SeverityWarning, c, "profiles."+c, "no client of that name has a token in http.auth.tokens, so the profile never applies; fix the name or add the client's token")
		}
	}
	return out
}
