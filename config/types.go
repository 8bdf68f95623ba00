package config

import (
	"fmt"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/policy"
)

type (
	// Workspace is the validated result of loading one or more config files.
	// Servers holds only the servers without per-server errors, in file order.
	Workspace struct {
		Files       []string  // the files loaded, in order
		Sources     []Source  // what each file that could be read was read as
		Servers     []*Server // valid servers in config order (later files replace earlier ids in place)
		Rejected    []string  // ids of servers present in the config but rejected by a per-server error
		EnvFiles    []string  // absolute paths of the env_files the servers name, present or not
		Limits      Limits
		Security    Security
		Naming      Naming
		Admin       Admin
		HTTP        HTTP
		Discovery   Discovery
		Cache       Cache
		OAuthClient OAuthClient // the top-level oauth section: the client ID metadata document
		// Profiles limit what each authenticated client sees, by client name.
		Profiles map[string]Profile
		// Policy is the policy list, compiled: the rules every tool call is
		// checked against, first match deciding; nil without rules. A later
		// file's list replaces an earlier one's. PolicyRules are its rules
		// as written.
		Policy      *policy.Set
		PolicyRules []policy.Rule
		// Audit is where the audit log goes; the zero Audit writes none.
		Audit Audit
		// RateLimits limit each principal's tool calls.
		RateLimits RateLimits
		// Views are the narrower catalogs served at /mcp/<name>, by name.
		Views map[string]View
	}

	// Source is one config file as read: its dialect and how many servers it defines.
	Source struct {
		File    string
		Dialect Dialect
		Servers int
	}

	// Discovery says how clients find the tools: all of them in tools/list,
	// or a search tool in front of a large catalog.
	Discovery struct {
		Mode   DiscoveryMode // default all
		Always []string      // exported-name patterns listed even in search mode
	}

	// HTTP configures the streamable-HTTP downstream transport.
	HTTP struct {
		AllowedOrigins []string // Origins accepted besides the server's own
		MaxBodyBytes   int64    // bound on one request body
		MaxBatchBytes  int64    // bound on the answers held for one JSON-RPC batch's array
		Auth           Auth     // who may connect; zero when http.auth is not set
	}

	// Limits are workspace-wide resource limits.
	Limits struct {
		MaxConcurrent int   // 0 = unlimited
		MaxInstances  int   // upstream instances of all servers together; default 256, 0 = unlimited
		MaxRSS        int64 // bytes; a shared instance using more is replaced between calls; 0 = no limit
	}

	// Cache bounds the result cache: upstream results kept while their
	// caching hints (ttlMs, cacheScope) say they are fresh.
	Cache struct {
		MaxBytes int64 // default DefaultCacheMaxBytes; 0 = no cache
	}

	// Security restricts what a config may start.
	Security struct {
		AllowedCommands []string // empty = any command
	}

	// Naming holds workspace-wide naming rules.
	Naming struct {
		ValidPattern string // regular expression every original and exported name must match
	}

	// Admin configures the built-in mcp_admin toolset.
	Admin struct {
		Enabled       bool // default true
		LeaseReminder bool // default true
	}

	// Server is one validated upstream server definition with every value resolved.
	Server struct {
		ID         string
		File       string // config file that defined it
		Line       int    // line of its key in that file
		Stateless  bool   // truely-stateless
		Transport  Transport
		Command    string
		Args       []string
		Cwd        string            // absolute; defaults to the config file's directory
		Env        map[string]string // resolved variables of the server's own (secret values!)
		InheritEnv []string          // host variables passed on besides the safe base: names or * patterns
		HostVars   []string          // host variables its config reads ({env: VAR}, ${VAR}): their values are its secrets
		Withheld   []string          // host variables the rest of the config reads for its secrets: inherit_env passes them only named exactly
		URL        string
		Headers    map[string]string // resolved (secret values!)
		// PrincipalHeaders are the headers whose value is the caller's own,
		// by header name: what of the principal each carries
		// (PrincipalSubject, PrincipalClient, PrincipalIssuer, or
		// PrincipalClaimPrefix and a claim's name), filled in per request.
		PrincipalHeaders map[string]string
		Auth             ServerAuth // how the aggregator authorizes itself at a remote server
		SessionID        string
		Protocol         string // "" or "auto" means the 2025-11-25 handshake
		Required         bool
		Insecure         bool
		ConnectTimeout   time.Duration // default 30s
		RequestTimeout   time.Duration // default 60s
		PingInterval     time.Duration // health ping of a shared instance; default 30s, 0 = off
		Tools            Tools
		Resources        Filter // on resource URIs
		Prompts          Filter // on original prompt names
		Transforms       []Transform
		Lease            Lease
		LeaseReminder    bool // default true
		// FromEnv lists every text that ${VAR} or {env: VAR} filled in from the host
		// environment or the env file, in any field (url, args, command, cwd, env,
		// headers, ...): secret values, scrubbed from all output. Not hashed: the
		// fields they were filled into are.
		FromEnv []string
		Hash    string
	}

	// Filter admits names (or URIs) by * patterns, as tools.whitelist and
	// tools.blacklist do.
	Filter struct {
		Whitelist []string
		Blacklist []string
	}

	// Tools controls which upstream tools are exported and their per-tool settings.
	Tools struct {
		Whitelist []string
		Blacklist []string
		Mode      ToolMode
		Defaults  ToolSettings
		Config    map[string]ToolSettings // keyed by original upstream tool name
	}

	// ToolSettings are per-tool limits; zero values mean "not set".
	ToolSettings struct {
		Timeout      time.Duration
		MaxInstances int
	}

	// Transform is one rename step applied to a tool name.
	Transform struct {
		Kind   TransformKind
		Add    string // prefix/suffix added
		Remove string // prefix removed first when present (prefix only)
	}

	// Lease configures per-session instances of a stateful server.
	Lease struct {
		IdleTTL      time.Duration // 0 = never
		MaxInstances int           // default 16, 0 = unlimited
		Prewarm      int
		// QueueTimeout is how long a session over MaxInstances waits for an
		// instance to free up; 0 refuses it at once.
		QueueTimeout time.Duration
		MaxAge       time.Duration // replace an instance this old between calls; 0 = never
		MaxCalls     int           // replace an instance after this many calls; 0 = never
	}

	// Problem is one finding about the config: an error or a warning.
	Problem struct {
		Severity Severity
		File     string
		Line     int
		Server   string
		Tool     string
		Field    string
		Message  string
		// Environment marks an error that is the environment's alone: a
		// variable the config reads is not set, or an env_file it names does
		// not exist. Setting the variable (creating the file) clears it; the
		// config itself needs no change.
		Environment bool
	}
)

// Transport names how an upstream is reached.
type Transport string

// Transports.
const (
	TransportStdio Transport = "stdio"
	TransportHTTP  Transport = "streamable_http"
	TransportSSE   Transport = "sse"
)

// ToolMode is how unconfigured upstream tools are treated.
type ToolMode string

// Tool modes.
const (
	ModeDynamic ToolMode = "dynamic"
	ModeStrict  ToolMode = "strict"
)

// DiscoveryMode is what tools/list holds.
type DiscoveryMode string

// Discovery modes.
const (
	// DiscoveryAll lists every exported tool (the default).
	DiscoveryAll DiscoveryMode = "all"
	// DiscoverySearch lists the admin tools, discovery.always matches and
	// the pair mcp_search_tools / mcp_call_tool, and nothing else.
	DiscoverySearch DiscoveryMode = "search"
)

// TransformKind is the kind of a Transform step.
type TransformKind string

// Transform kinds.
const (
	TransformPrefix TransformKind = "prefix"
	TransformSuffix TransformKind = "suffix"
)

// Severity ranks a Problem.
type Severity int

// Severities.
const (
	SeverityWarning Severity = iota
	SeverityError
)

// String returns "warning" or "error".
func (s Severity) String() string {
	if s == SeverityError {
		return "error"
	}
	return "warning"
}

// DefaultValidPattern is the tool name rule shared by the major LLM providers.
const DefaultValidPattern = `^[a-zA-Z0-9_-]{1,64}$`

// DefaultMaxBodyBytes bounds one HTTP request body unless http.max_body_bytes says otherwise.
const DefaultMaxBodyBytes = 32 << 20

// DefaultMaxBatchBytes bounds the answers held for one JSON-RPC batch's
// JSON array unless http.max_batch_bytes says otherwise.
const DefaultMaxBatchBytes = 16 << 20

// String renders the problem on one line for people:
// `error: mcp.yaml:12: server "github": env.TOKEN: host variable GITHUB_TOKEN is not set`.
func (p Problem) String() string {
	s := p.Severity.String() + ": "
	if p.File != "" {
		s += p.File
		if p.Line > 0 {
			s += fmt.Sprintf(":%d", p.Line)
		}
		s += ": "
	}
	if p.Server != "" {
		s += fmt.Sprintf("server %q: ", p.Server)
	}
	if p.Tool != "" {
		s += fmt.Sprintf("tool %q: ", p.Tool)
	}
	if p.Field != "" {
		s += p.Field + ": "
	}
	return s + p.Message
}
