package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTLSFlags(t *testing.T) {
	assert.NoError(t, tlsFlags("", "", ""))
	assert.NoError(t, tlsFlags("c", "k", "127.0.0.1:8443"))
	assert.ErrorContains(t, tlsFlags("c", "", "127.0.0.1:8443"), "go together")
	assert.ErrorContains(t, tlsFlags("", "k", "127.0.0.1:8443"), "go together")
	assert.ErrorContains(t, tlsFlags("c", "k", ""), "need --http")
}

// TestServeFlagsRefused: a serve command line that cannot be used exits 2 with one
// line on stderr naming the flag and how to fix it, the first in the order below when
// several are wrong.
func TestServeFlagsRefused(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--reload-settle", "0s"}, "serve: --reload-settle 0s: use a duration above 0 and at most 1m0s, such as 300ms\n"},
		{[]string{"--reload-settle", "2m"}, "serve: --reload-settle 2m0s: use a duration above 0 and at most 1m0s, such as 300ms\n"},
		{[]string{"--cgroups", "on"}, "serve: --cgroups \"on\": use auto or off\n"},
		{[]string{"--session-id-prefix", "a b"}, "serve: --session-id-prefix \"a b\": use 1 to 32 letters, digits, '.', '_' or '-', such as r1-\n"},
		{[]string{"--max-sessions-per-client", "-1"}, "serve: --max-sessions-per-client -1: use a count of sessions, or 0 for no cap beyond --max-sessions\n"},
		{[]string{"--max-tasks-per-client", "-1"}, "serve: --max-tasks-per-client -1: use a count, or 0 for no cap of the client's own\n"},
		{[]string{"--max-leases-per-client", "-2"}, "serve: --max-leases-per-client -2: use a count, or 0 for no cap of the client's own, or -1 for half of each server's lease.max_instances\n"},
		{[]string{"--max-calls-per-client", "-2"}, "serve: --max-calls-per-client -2: use a count, or 0 for no cap of the client's own, or -1 for half of limits.max_concurrent\n"},
		{[]string{"--max-conns-per-address", "-1"}, "serve: --max-conns-per-address -1: use a count of connections, or 0 for no cap\n"},
		{[]string{"--session-max-age", "0s"}, "serve: --session-max-age 0s: use a positive duration such as 24h\n"},
		{[]string{"--session-key-file", "keys"}, "serve: --session-key-file needs --http: stdio sessions have no id to seal\n"},
		{[]string{"--drain-grace", "-1s"}, "serve: --drain-grace -1s: use a positive duration such as 30s\n"},
		{[]string{"--http", "abc"}, "serve: --http \"abc\": \"abc\" is not a port; use HOST:PORT, :PORT or PORT, such as 127.0.0.1:8080\n"},
		{[]string{"--tls-cert", "c.pem"}, "serve: --tls-cert and --tls-key go together: give both files (the PEM certificate chain and its private key) or neither\n"},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, "serve: --tls-cert and --tls-key serve HTTPS and need --http ADDR\n"},
		{[]string{"--cgroups", "on", "--drain-grace", "0s", "--http", "abc"}, "serve: --cgroups \"on\": use auto or off\n"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var stderr bytes.Buffer
			f, code := parseServe(tt.args, &stderr)
			assert.Nil(t, f)
			assert.Equal(t, 2, code)
			assert.Equal(t, tt.want, stderr.String())
		})
	}
}

// TestServeFlagsResolved: the checked flags become what the packages take: no
// per-client shares on stdio, which has one client, and -1 for the transport's "no cap".
func TestServeFlagsResolved(t *testing.T) {
	tests := []struct {
		name                                   string
		args                                   []string
		tasks, leases, calls, conns, perClient int
	}{
		{"stdio: no shares", []string{"--max-tasks-per-client", "5", "--max-leases-per-client", "-1", "--max-calls-per-client", "3"},
			0, 0, 0, downstream.DefaultMaxConnsPerClient, downstream.DefaultMaxSessionsPerClient},
		{"http keeps the shares", []string{"--http", "8080", "--max-tasks-per-client", "5", "--max-leases-per-client", "-1", "--max-calls-per-client", "3"},
			5, -1, 3, downstream.DefaultMaxConnsPerClient, downstream.DefaultMaxSessionsPerClient},
		{"0: no cap", []string{"--http", "8080", "--max-conns-per-address", "0", "--max-sessions-per-client", "0"},
			proxy.DefaultMaxTasksPerClient, proxy.DefaultMaxLeasesPerClient, proxy.DefaultMaxCallsPerClient, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f, code := parseServe(tt.args, &stderr)
			require.NotNil(t, f, stderr.String())
			assert.Equal(t, 0, code)
			assert.Empty(t, stderr.String())
			assert.Equal(t, []int{tt.tasks, tt.leases, tt.calls, tt.conns, tt.perClient},
				[]int{f.maxTasks, f.maxLeases, f.maxCalls, f.maxConns, f.maxPerClient})
		})
	}
}

// TestServeHelp: --help prints the flags and exits 0, starting nothing.
func TestServeHelp(t *testing.T) {
	var stderr bytes.Buffer
	f, code := parseServe([]string{"--help"}, &stderr)
	assert.Nil(t, f)
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr.String(), "-session-key-file FILE")
}

// TestStdioDone: the stdio server's end gives exit 0 when the client closed stdin or a
// stop signal came, and 1 when the transport failed, each logged as what it was.
func TestStdioDone(t *testing.T) {
	stopped, stop := context.WithCancel(context.Background())
	stop()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		code int
		log  string
	}{
		{"stdin closed", context.Background(), nil, 0, "downstream closed; shutting down"},
		{"stdin at EOF", context.Background(), io.EOF, 0, "downstream closed; shutting down"},
		{"a stop signal", stopped, context.Canceled, 0, "stop signal: shutting down"},
		{"a failure", context.Background(), errors.New("write |1: broken pipe"), 1, `level=ERROR msg="stdio transport failed" err="write |1: broken pipe"`},
		{"a failure, wrapped EOF is no failure", context.Background(), fmt.Errorf("read: %w", io.EOF), 0, "downstream closed; shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			assert.Equal(t, tt.code, stdioDone(tt.ctx, tt.err, slog.New(slog.NewTextHandler(&buf, nil))))
			assert.Contains(t, buf.String(), tt.log)
		})
	}
}
