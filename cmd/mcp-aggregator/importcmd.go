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

// importConfigs writes the config files given, of any dialect, as one commented
// mcp-aggregator YAML document, to stdout or to the --output file, and says on stderr
// what the translation noticed and what checking the result finds. It writes the result
// only when it would run once the variables it reads are set (listing.ReportImport):
// otherwise, or when a file cannot be read at all or the files define no server, it
// exits 1, naming each server at fault and how to fix it, and writes nothing.
func importConfigs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	var exclude configFlags
	var output string
	fs.Var(&exclude, "exclude", "leave out the server read as `ID` (repeatable)")
	fs.StringVar(&output, "output", "", "write the result to `FILE` (replaced whole, and only if the import succeeds) instead of stdout")
	fs.StringVar(&output, "o", "", "short for --output `FILE`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: mcp-aggregator import [--exclude ID]... [--output FILE] FILE...")
		fmt.Fprintln(fs.Output(), "FILE: mcpServers JSON (Claude Desktop, Cursor, Claude Code, Gemini CLI), VS Code or TENEX mcp.json,")
		fmt.Fprintln(fs.Output(), "a HoloDeck agent.yaml, a chatagent config, or mcp-aggregator YAML. Later files replace servers of the same id.")
		fmt.Fprintln(fs.Output(), "Nothing is written, and the exit status is 1, when the result would not run as it is;")
		fmt.Fprintln(fs.Output(), "variables it reads that are not set yet are warnings only.")
		fs.PrintDefaults()
	}
	fs.SetOutput(stderr)
	names, code := parseFiles(fs, args)
	if code >= 0 {
		return code
	}
	if len(names) == 0 {
		fs.Usage()
		return 2
	}
	var files []config.ImportFile
	for _, name := range names {
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
	imported := config.ImportWith(files, config.ImportOptions{Exclude: exclude})
	listing.Problems(stderr, imported.Problems)
	if imported.YAML == nil {
		return 1
	}
	// What check would say of the result, placed where it is written (for stdout,
	// beside the first file) so that relative paths resolve as they will.
	at := output
	if at == "" {
		at = filepath.Join(filepath.Dir(files[0].Name), "mcp-aggregator.yaml")
	}
	_, checked := config.LoadBytes(at, imported.YAML, os.LookupEnv)
	report := listing.ReportImport(imported.Problems, checked, imported.Origins)
	if report.Refused() {
		if len(report.Checked) > 0 {
			fmt.Fprintln(stderr, "checking the result:")
			listing.Problems(stderr, report.Checked)
		}
		for _, line := range report.Refusal {
			fmt.Fprintln(stderr, "error:", line)
		}
		return 1
	}
	if output != "" {
		if err := replaceFile(output, imported.YAML); err != nil {
			fmt.Fprintf(stderr, "error: %s: %v; nothing was written\n", output, err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %s: %d server(s)\n", output, len(imported.Origins))
	} else if _, err := stdout.Write(imported.YAML); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if len(report.Checked) > 0 {
		fmt.Fprintln(stderr, "checking the result:")
		listing.Problems(stderr, report.Checked)
	}
	return 0
}

// parseFiles parses the flags, which may come before, between or after the files, and
// returns the files; code is the exit status when the command line cannot be used (or
// asked for help), else -1.
func parseFiles(fs *flag.FlagSet, args []string) (files []string, code int) {
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, 0
			}
			return nil, 2
		}
		args = fs.Args()
		if len(args) == 0 {
			return files, -1
		}
		files, args = append(files, args[0]), args[1:]
	}
}

// replaceFile replaces path whole with data: written beside it and renamed over it, so
// that a reader (a serve watching it) sees the old config or the new one, never a part.
// A new file is readable by its owner alone, as it may hold values copied from a client's
// config; an existing one keeps its mode, and a symbolic link is followed.
func replaceFile(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
		if info, err := os.Stat(path); err == nil {
			if !info.Mode().IsRegular() {
				return errors.New("not a regular file; name a file to write")
			}
			mode = info.Mode().Perm()
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is none
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
