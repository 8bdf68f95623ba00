package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstreamauth"
)

// catalogTool is one line of `tools` output.
type catalogTool struct {
	Name        string `json:"name"`
	Server      string `json:"server"`
	Original    string `json:"original"`
	Description string `json:"description"`
	// Definition is the tool as tools/list shows it (with the exported name).
	Definition json.RawMessage `json:"definition"`
}

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
	src := resolveConfig(c.configs, os.Getenv)
	src.secrets = &c.secrets
	for _, n := range src.notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	ws, problems := src.load()
	supervisor := startSupervisor(log, false)
	defer supervisor.Close()
	upAuth := upstreamauth.New(context.Background(), upstreamauth.Options{Secrets: &c.secrets, Logger: log})
	p := proxy.New(proxy.Options{Logger: log, Version: buildVersion(), Upstream: upstream.Options{Supervisor: supervisor, Authorize: upAuth.Authorize, Secrets: &c.secrets}})
	report := p.Reconcile(context.Background(), ws, problems)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		p.Close(ctx)
	}()

	var out []catalogTool
	for _, e := range p.Catalog().Entries() {
		var head struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(e.Raw, &head)
		desc, _, _ := strings.Cut(strings.TrimSpace(head.Description), "\n")
		out = append(out, catalogTool{Name: e.Exported, Server: e.Server, Original: e.Original, Description: desc, Definition: e.Raw})
	}
	errs := 0
	for _, pr := range report.Problems {
		if pr.Severity == config.SeverityError {
			errs++
		}
	}
	if *asJSON {
		texts := make([]string, 0, len(report.Problems))
		for _, pr := range report.Problems {
			texts = append(texts, pr.String())
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // definitions read as their servers wrote them
		// How the config was found, then what was done with it.
		notes := append(append([]string{}, src.notes...), report.Notes...)
		_ = enc.Encode(map[string]any{"tools": out, "problems": texts, "notes": notes})
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tSERVER\tORIGINAL\tDESCRIPTION")
		for _, t := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Server, t.Original, inert(t.Description))
		}
		_ = tw.Flush()
		if len(report.Problems)+len(report.Notes) > 0 {
			fmt.Fprintln(stdout)
			printProblems(stdout, report.Problems)
			for _, n := range report.Notes {
				fmt.Fprintln(stdout, "note:", inertLines(n))
			}
		}
	}
	if errs > 0 {
		return 1
	}
	return 0
}

// inert is s for a terminal: each control character (C0, DEL, C1) an
// upstream put in a description, such as the start of an escape sequence
// that would clear the screen or write the clipboard, is written as a
// visible escape (\x1b, \u009b) and reaches the terminal as text.
func inert(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// inertLines is inert for each line of s, keeping its line breaks.
func inertLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = inert(l)
	}
	return strings.Join(lines, "\n")
}
