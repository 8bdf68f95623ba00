package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/gateway"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
	"github.com/mcp-aggregator/mcp-aggregator/reload"
)

// serveFlags are serve's flags.
type serveFlags struct {
	common
	httpAddr     string
	sessionTTL   time.Duration
	maxSessions  int
	maxPerClient int
	maxTasks     int
	maxLeases    int
	maxCalls     int
	maxConns     int
	allowUnauth  bool
	tlsCert      string
	tlsKey       string
	drainGrace   time.Duration
	idPrefix     string
	keyFile      string
	maxAge       time.Duration
	settle       time.Duration
	cgroups      string
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.common.register(fs)
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP at http://`ADDR`/mcp instead of stdio (loopback unless a host is given)")
	fs.DurationVar(&f.sessionTTL, "session-idle-ttl", 30*time.Minute, "with --http: end HTTP sessions idle this long (their leases end too)")
	fs.IntVar(&f.maxSessions, "max-sessions", downstream.DefaultMaxSessions, "with --http: refuse a new session (503) while this many are open")
	fs.IntVar(&f.maxPerClient, "max-sessions-per-client", downstream.DefaultMaxSessionsPerClient, "with --http: refuse a new session (429) of a client (its http.auth name, else its address off loopback) while it holds this many; 0: no cap beyond --max-sessions")
	fs.IntVar(&f.maxTasks, "max-tasks-per-client", proxy.DefaultMaxTasksPerClient, "with --http: refuse a task-augmented call of a client (its http.auth name, else its address off loopback) while its sessions hold this many tasks; 0: no cap beyond the aggregator's 10000")
	fs.IntVar(&f.maxLeases, "max-leases-per-client", proxy.DefaultMaxLeasesPerClient, "with --http: refuse a client (its http.auth name, else its address off loopback) a new lease of a server while it holds this many of that server's instances; -1: half of the server's lease.max_instances; 0: no cap beyond lease.max_instances")
	fs.IntVar(&f.maxCalls, "max-calls-per-client", proxy.DefaultMaxCallsPerClient, "with --http: a client (its http.auth name, else its address off loopback) holding this many calls in flight waits for one of them to end before its next starts, so that limits.max_concurrent always leaves room for the others; -1: half of limits.max_concurrent; 0: no share of its own")
	fs.IntVar(&f.maxConns, "max-conns-per-address", downstream.DefaultMaxConnsPerClient, "with --http: answer 429 to a connection from an address that holds this many open; 0: no cap (behind a load balancer, every client shares its address)")
	fs.BoolVar(&f.allowUnauth, "allow-unauthenticated", false, "with --http on a non-loopback address: serve even though the config sets no http.auth (only behind something that authenticates)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --http: serve HTTPS with the PEM certificate chain in `FILE` (reloaded when it changes; needs --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --http: the PEM private key of --tls-cert, in `FILE`")
	fs.DurationVar(&f.drainGrace, "drain-grace", shutdownGrace, "with --http: after SIGTERM or POST /drain, let the calls in flight run this long at most while refusing new sessions, then exit")
	fs.StringVar(&f.idPrefix, "session-id-prefix", "", "with --http: start every session id with `LABEL` (letters, digits, '.', '_', '-'; at most 32), so that a load balancer can route sessions by it")
	fs.StringVar(&f.keyFile, "session-key-file", "", "with --http: seal each session's portable state into its id with the first key of `FILE` (one key a line: 32 random bytes, base64 or hex; every key opens; reloaded when it changes), so that every replica holding the file can serve the session")
	fs.DurationVar(&f.maxAge, "session-max-age", downstream.DefaultSessionMaxAge, "with --session-key-file: a sealed session id opens for this long after its initialize; then the client initializes again")
	fs.DurationVar(&f.settle, "reload-settle", reload.DefaultSettle, "reload a config file written in place once it has stayed unchanged this long (one replaced by rename reloads at once)")
	fs.StringVar(&f.cgroups, "cgroups", "auto", "`auto`: on Linux, run each stdio upstream in a cgroup v2 of its own where one can be created; off: process groups and the subreaper only")
}

// parseServe parses and checks serve's command line; nil and the exit code
// when it cannot be used (or asked for help), having said why on stderr.
func parseServe(args []string, stderr io.Writer) (*serveFlags, int) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := &serveFlags{}
	f.register(fs)
	if ok, code := parse(fs, args, stderr); !ok {
		return nil, code
	}
	if err := f.check(); err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return nil, 2
	}
	f.resolve()
	return f, 0
}

// check returns the first flag that cannot be used, and how to fix it.
func (f *serveFlags) check() error {
	if f.settle <= 0 || f.settle > reload.MaxSettle {
		return fmt.Errorf("--reload-settle %s: use a duration above 0 and at most %s, such as 300ms", f.settle, reload.MaxSettle)
	}
	if f.cgroups != "auto" && f.cgroups != "off" {
		return fmt.Errorf("--cgroups %q: use auto or off", f.cgroups)
	}
	if !downstream.ValidSessionIDPrefix(f.idPrefix) {
		return fmt.Errorf("--session-id-prefix %q: use 1 to 32 letters, digits, '.', '_' or '-', such as r1-", f.idPrefix)
	}
	if f.maxPerClient < 0 {
		return fmt.Errorf("--max-sessions-per-client %d: use a count of sessions, or 0 for no cap beyond --max-sessions", f.maxPerClient)
	}
	for _, c := range []struct {
		name  string
		n     int
		min   int
		extra string // what -1 means
	}{
		{"max-tasks-per-client", f.maxTasks, 0, ""},
		{"max-leases-per-client", f.maxLeases, -1, ", or -1 for half of each server's lease.max_instances"},
		{"max-calls-per-client", f.maxCalls, -1, ", or -1 for half of limits.max_concurrent"},
	} {
		if c.n < c.min {
			return fmt.Errorf("--%s %d: use a count, or 0 for no cap of the client's own%s", c.name, c.n, c.extra)
		}
	}
	if f.maxConns < 0 {
		return fmt.Errorf("--max-conns-per-address %d: use a count of connections, or 0 for no cap", f.maxConns)
	}
	if f.maxAge <= 0 {
		return fmt.Errorf("--session-max-age %s: use a positive duration such as 24h", f.maxAge)
	}
	if f.keyFile != "" && f.httpAddr == "" {
		return errors.New("--session-key-file needs --http: stdio sessions have no id to seal")
	}
	if f.drainGrace <= 0 {
		return fmt.Errorf("--drain-grace %s: use a positive duration such as 30s", f.drainGrace)
	}
	if err := gateway.CheckAddr(f.httpAddr); err != nil {
		return err
	}
	return tlsFlags(f.tlsCert, f.tlsKey, f.httpAddr)
}

// resolve turns the checked flags into the values the packages take: no
// share of a client on stdio, which has one, and -1 for "no cap".
func (f *serveFlags) resolve() {
	if f.httpAddr == "" {
		f.maxTasks, f.maxLeases, f.maxCalls = 0, 0, 0 // stdio has one client: no share to keep
	}
	if f.maxConns == 0 {
		f.maxConns = -1 // the transport's "no cap"
	}
	if f.maxPerClient == 0 {
		f.maxPerClient = -1 // the transport's "no cap of its own"
	}
}

// tlsFlags checks that --tls-cert and --tls-key come together and only
// with --http.
func tlsFlags(certFile, keyFile, httpAddr string) error {
	switch {
	case certFile == "" && keyFile == "":
		return nil
	case certFile == "" || keyFile == "":
		return errors.New("--tls-cert and --tls-key go together: give both files (the PEM certificate chain and its private key) or neither")
	case httpAddr == "":
		return errors.New("--tls-cert and --tls-key serve HTTPS and need --http ADDR")
	}
	return nil
}
