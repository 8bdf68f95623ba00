package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// DefaultPaths returns the places a config is looked for when none is given, in order of
// preference; callers use the first that exists.
func DefaultPaths() []string {
	return []string{"./mcp-aggregator.yaml", "./.minds/mcp.yaml"}
}

// Load reads the config files in order and merges them into one Workspace. lookupEnv
// resolves host variables (os.LookupEnv in production); nil means none are set.
//
// Layering: a server id defined again in a later file is replaced as a whole by the later
// definition, which keeps the position of the first one; problems of a replaced
// definition are dropped, since it is no longer in effect. Workspace settings (limits,
// security, naming, admin) set in a later file override earlier ones key by key.
//
// A missing file is reported as an error but contributes no servers and does not void the
// Workspace: a deleted config means an empty config. Any other workspace-level error
// (unreadable file, invalid YAML, missing or unsupported version, a server id used twice
// in one file, a bad workspace setting) returns a nil Workspace. A per-server error only
// moves that server from Servers to Rejected.
func Load(paths []string, lookupEnv func(string) (string, bool)) (*Workspace, []Problem) {
	srcs := make([]source, len(paths))
	for i, p := range paths {
		data, err := ReadFile(p)
		srcs[i] = source{name: p, data: data, err: err}
	}
	return load(srcs, lookupEnv, readEnvFile)
}

// LoadBytes is Load for one file whose content is already in memory; name is its path,
// used in problems and to resolve relative cwd and env_file paths.
func LoadBytes(name string, data []byte, lookupEnv func(string) (string, bool)) (*Workspace, []Problem) {
	return load([]source{{name: name, data: data}}, lookupEnv, readEnvFile)
}

// Server returns the valid server with the given id, or nil.
func (w *Workspace) Server(id string) *Server {
	if w == nil {
		return nil
	}
	for _, s := range w.Servers {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// source is one config file's content, or the error reading it.
type source struct {
	name string
	data []byte
	err  error
}

// maxEnvFileSize keeps a mistaken env_file (a device, a huge log) from being read whole.
const maxEnvFileSize = 1 << 20

// readEnvFile reads a regular file of bounded size.
func readEnvFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if info.Size() > maxEnvFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxEnvFileSize)
	}
	return io.ReadAll(io.LimitReader(f, maxEnvFileSize))
}

// load parses and merges the sources; readFile reads env files.
func load(srcs []source, lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (*Workspace, []Problem) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	ws := &Workspace{
		Limits:    Limits{MaxInstances: DefaultMaxInstances},
		Naming:    Naming{ValidPattern: DefaultValidPattern},
		Admin:     Admin{Enabled: true, LeaseReminder: true},
		HTTP:      HTTP{MaxBodyBytes: DefaultMaxBodyBytes, MaxBatchBytes: DefaultMaxBatchBytes},
		Discovery: Discovery{Mode: DiscoveryAll},
		Cache:     Cache{MaxBytes: DefaultCacheMaxBytes},
	}
	// Every env_file a server names, read or not, is watched with the config.
	seenEnvFile := map[string]bool{}
	envFile := func(path string) ([]byte, error) {
		if !seenEnvFile[path] {
			seenEnvFile[path] = true
			ws.EnvFiles = append(ws.EnvFiles, path)
		}
		return readFile(path)
	}
	var (
		problems []Problem
		fatal    bool
		defs     []*serverDef
		index    = map[string]int{}
		// where the profiles in effect were read, for their problems
		profileFile  string
		profileLines map[string]int
		wsVars       []string // host variables the workspace settings read
		rateFile     string   // the file rate_limits came from
		viewFile     string   // the file views came from, and their lines
		viewLines    map[string]int
	)
	for _, src := range srcs {
		ws.Files = append(ws.Files, src.name)
		if src.err != nil {
			fatal = fatal || !errors.Is(src.err, fs.ErrNotExist)
			problems = append(problems, readProblem(src))
			continue
		}
		dir, err := filepath.Abs(filepath.Dir(src.name))
		if err != nil {
			dir = filepath.Dir(src.name)
		}
		res := parseFile(fileContext{file: src.name, dir: dir, lookupEnv: lookupEnv, readFile: envFile}, src.data)
		wsVars = append(wsVars, res.hostVars...)
		problems = append(problems, res.problems.problems...)
		fatal = fatal || res.problems.hasErrors()
		if res.dialect != "" {
			ws.Sources = append(ws.Sources, Source{File: src.name, Dialect: res.dialect, Servers: len(res.servers)})
		}
		res.settings.applyTo(ws)
		if res.settings.rateLimitsSet {
			rateFile = src.name
		}
		if res.settings.viewsSet {
			viewFile, viewLines = src.name, res.settings.viewLines
		}
		if res.settings.access.profilesSet {
			profileFile, profileLines = src.name, res.settings.access.profileLines
		}
		for _, d := range res.servers {
			if i, ok := index[d.srv.ID]; ok {
				defs[i] = d
				continue
			}
			index[d.srv.ID] = len(defs)
			defs = append(defs, d)
		}
	}

	withhold(defs, wsVars)
	for _, d := range defs {
		applyOAuth(d.srv, ws.OAuthClient)
		finish(d, ws)
		problems = append(problems, d.problems.problems...)
		if d.problems.hasErrors() {
			ws.Rejected = append(ws.Rejected, d.srv.ID)
			continue
		}
		ws.Servers = append(ws.Servers, d.srv)
	}
	accessProblems := append(checkAccess(ws, profileFile, profileLines), checkRateLimits(ws, rateFile)...)
	accessProblems = append(accessProblems, checkViews(ws, viewFile, viewLines)...)
	problems = append(problems, accessProblems...)
	fatal = fatal || HasErrors(accessProblems)
	if fatal {
		return nil, problems
	}
	return ws, problems
}

// readProblem describes a config file that could not be read.
func readProblem(src source) Problem {
	p := Problem{Severity: SeverityError, File: src.name}
	switch st, err := os.Stat(src.name); {
	case errors.Is(src.err, fs.ErrNotExist):
		p.Message = "file does not exist; create it, or stop passing it with --config"
	case errors.Is(src.err, ErrFileTooLarge) && err == nil && st.Mode().IsRegular():
		p.Message = tooLarge(st.Size())
	case errors.Is(src.err, ErrFileTooLarge):
		p.Message = tooLarge(-1)
	case err == nil && st.IsDir():
		p.Message = fmt.Sprintf("is a directory, not a config file; name the file in it, such as %s", filepath.Join(src.name, "mcp-aggregator.yaml"))
	default:
		p.Message = fmt.Sprintf("cannot read the file (%v); check its permissions", errorCause(src.err))
	}
	return p
}

// applyTo overlays the settings one file sets onto the workspace.
func (s settings) applyTo(ws *Workspace) {
	if s.maxConcurrent != nil {
		ws.Limits.MaxConcurrent = *s.maxConcurrent
	}
	if s.maxInstances != nil {
		ws.Limits.MaxInstances = *s.maxInstances
	}
	if s.maxRSS != nil {
		ws.Limits.MaxRSS = *s.maxRSS
	}
	if s.cacheMaxBytes != nil {
		ws.Cache.MaxBytes = *s.cacheMaxBytes
	}
	if s.commandsSet {
		ws.Security.AllowedCommands = s.allowedCommands
	}
	if s.validPattern != nil {
		ws.Naming.ValidPattern = *s.validPattern
	}
	if s.adminEnabled != nil {
		ws.Admin.Enabled = *s.adminEnabled
	}
	if s.leaseReminder != nil {
		ws.Admin.LeaseReminder = *s.leaseReminder
	}
	if s.originsSet {
		ws.HTTP.AllowedOrigins = s.allowedOrigins
	}
	if s.maxBodyBytes != nil {
		ws.HTTP.MaxBodyBytes = int64(*s.maxBodyBytes)
	}
	if s.maxBatchBytes != nil {
		ws.HTTP.MaxBatchBytes = int64(*s.maxBatchBytes)
	}
	if s.discoveryMode != nil {
		ws.Discovery.Mode = *s.discoveryMode
	}
	if s.alwaysSet {
		ws.Discovery.Always = s.always
	}
	if s.access.auth != nil {
		ws.HTTP.Auth = *s.access.auth
	}
	if s.oauth != nil {
		ws.OAuthClient = *s.oauth
	}
	if s.access.profilesSet {
		ws.Profiles = s.access.profiles
	}
	if s.auditSet {
		ws.Audit = s.audit
	}
	if s.rateLimitsSet {
		ws.RateLimits = s.rateLimits
	}
	if s.viewsSet {
		ws.Views = s.views
	}
	if s.access.policySet {
		ws.Policy, ws.PolicyRules = s.access.policy, s.access.policyRules
	}
}

// finish applies the workspace-wide settings a server depends on, then hashes it.
func finish(d *serverDef, ws *Workspace) {
	if !d.leaseReminderSet {
		d.srv.LeaseReminder = ws.Admin.LeaseReminder
	}
	if !ws.Admin.Enabled && d.srv.LeaseReminder {
		// The reminder tells the agent to call mcp_release, which is not exported.
		if d.leaseReminderSet {
			d.problems.warnf(d.srv.Line, "lease_reminder", "no reminder is given while admin.enabled is false: there is no mcp_release to call; remove lease_reminder or enable the admin tools")
		}
		d.srv.LeaseReminder = false
	}
	checkAllowedCommand(d, ws.Security.AllowedCommands)
	finishExchange(d, ws)
	checkPerUser(d, ws)
	warnPrincipalHeaders(d, ws)
	d.srv.Hash = hashServer(d.srv, ws.Naming.ValidPattern)
}

// withhold sets the Withheld of each server whose inherit_env has a * pattern
// (true is "*"): the host variables the workspace settings (wsVars) and the
// other servers read for their secrets, less those the server reads itself.
// Other servers inherit by exact names alone, which Withheld never limits, so
// theirs stays empty and their hash unchanged when the rest of the config
// reads another variable.
func withhold(defs []*serverDef, wsVars []string) {
	for _, d := range defs {
		if !slices.ContainsFunc(d.srv.InheritEnv, func(p string) bool { return strings.Contains(p, "*") }) {
			continue
		}
		own := make(map[string]bool, len(d.srv.HostVars))
		for _, name := range d.srv.HostVars {
			own[name] = true
		}
		var out []string
		add := func(names []string) {
			for _, name := range names {
				if !own[name] {
					out = append(out, name)
				}
			}
		}
		add(wsVars)
		for _, other := range defs {
			if other != d {
				add(other.srv.HostVars)
			}
		}
		out = distinct(out)
		sort.Strings(out)
		d.srv.Withheld = out
	}
}
