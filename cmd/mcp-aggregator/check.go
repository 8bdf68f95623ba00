package main

import (
	"flag"
	"fmt"
	"io"
)

// check validates the config without starting any upstream.
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var c common
	c.register(fs)
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	src, err := resolveConfig(c.configs, false)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	ws, problems := src.load()
	errs, warns := printProblems(stdout, problems)
	switch {
	case errs > 0:
		fmt.Fprintf(stdout, "%d error(s), %d warning(s)\n", errs, warns)
		return 1
	case ws != nil:
		fmt.Fprintf(stdout, "ok: %d server(s), %d warning(s)\n", len(ws.Servers), warns)
	}
	return 0
}
