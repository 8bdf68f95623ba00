package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/listing"
)

// importConfigs prints the config files given, of any dialect, as one commented
// mcp-aggregator YAML document, and on stderr what the translation noticed and what
// checking the result finds (a variable that is not set, say). It exits 1, printing
// nothing, when a file cannot be read at all or the files define no server.
func importConfigs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: mcp-aggregator import FILE... > mcp-aggregator.yaml")
		fmt.Fprintln(fs.Output(), "FILE: mcpServers JSON (Claude Desktop, Cursor, Claude Code, Gemini CLI), VS Code or TENEX mcp.json,")
		fmt.Fprintln(fs.Output(), "a HoloDeck agent.yaml, a chatagent config, or mcp-aggregator YAML. Later files replace servers of the same id.")
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var files []config.ImportFile
	for _, name := range fs.Args() {
		data, err := config.ReadFile(name)
		if errors.Is(err, config.ErrFileTooLarge) {
			fmt.Fprintf(stderr, "error: %s: %v\n", name, err)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "error: %s: cannot read it (%v)\n", name, err)
			return 1
		}
		files = append(files, config.ImportFile{Name: name, Data: data})
	}
	out, problems := config.Import(files)
	errs, _ := listing.Problems(stderr, problems)
	if out == nil {
		return 1
	}
	// What check would say of the result, placed beside the first file so that
	// relative paths resolve as they will.
	beside := filepath.Join(filepath.Dir(files[0].Name), "mcp-aggregator.yaml")
	ws, more := config.LoadBytes(beside, out, os.LookupEnv)
	if why := listing.NothingToImport(ws, errs); why != "" {
		fmt.Fprintln(stderr, "error:", why)
		return 1
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if len(more) > 0 {
		fmt.Fprintln(stderr, "checking the result:")
		listing.Problems(stderr, more)
	}
	if errs > 0 {
		return 1
	}
	return 0
}
