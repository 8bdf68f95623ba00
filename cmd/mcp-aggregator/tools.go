package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/mcp-aggregator/mcp-aggregator/listing"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstreamauth"
)

// tools starts the upstreams, prints the exported catalog and every problem.
func tools(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON: {\"tools\": [...], \"problems\": [...], \"notes\": [...]}")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if !flagSet(fs, "log-level") {
		// The catalog and its problems are the output; the log says more
		// only when asked to.
		c.logLevel = "error"
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	src := c.source()
	for _, n := range src.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	ws, problems := src.Load()
	supervisor := startSupervisor(log, false)
	defer supervisor.Close()
	upAuth := upstreamauth.New(context.Background(), upstreamauth.Options{Secrets: &c.secrets, Logger: log})
	p := proxy.New(proxy.Options{Logger: log, Version: buildVersion(), Upstream: upstream.Options{Supervisor: supervisor, Authorize: upAuth.Authorize, Secrets: &c.secrets}})
	report := p.Reconcile(context.Background(), ws, problems)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		p.Close(ctx)
		closeLogins(upAuth)
	}()

	out := listing.NewCatalog(p.Catalog().Entries(), report.Problems, report.Notes)
	if *asJSON {
		// How the config was found, then what was done with it.
		out.Notes = append(append([]string{}, src.Notes...), report.Notes...)
		_ = out.WriteJSON(stdout)
	} else {
		_ = out.WriteTable(stdout)
	}
	if out.Errors() > 0 {
		return 1
	}
	return 0
}
