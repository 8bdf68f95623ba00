package listing

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// Tool is one tool of the exported catalog as `tools` lists it.
type Tool struct {
	Name        string `json:"name"`
	Server      string `json:"server"`
	Original    string `json:"original"`
	Description string `json:"description"` // its first line
	// Definition is the tool as tools/list shows it (with the exported name).
	Definition json.RawMessage `json:"definition"`
}

// Catalog is what `tools` prints: the exported tools, then what loading the
// config and starting its servers found.
type Catalog struct {
	Tools    []Tool
	Problems []config.Problem
	Notes    []string
}

// NewCatalog lists the entries of an exported catalog, in its order, with
// the problems and notes of the config and of the servers' start.
func NewCatalog(entries []*catalog.Entry, problems []config.Problem, notes []string) Catalog {
	c := Catalog{Problems: problems, Notes: notes}
	for _, e := range entries {
		var head struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(e.Raw, &head)
		desc, _, _ := strings.Cut(strings.TrimSpace(head.Description), "\n")
		c.Tools = append(c.Tools, Tool{Name: e.Exported, Server: e.Server, Original: e.Original, Description: desc, Definition: e.Raw})
	}
	return c
}

// Errors counts the problems that are errors.
func (c Catalog) Errors() int {
	n := 0
	for _, p := range c.Problems {
		if p.Severity == config.SeverityError {
			n++
		}
	}
	return n
}

// WriteJSON writes {"tools": [...], "problems": [...], "notes": [...]}, the
// definitions as their servers wrote them and the problems as text.
func (c Catalog) WriteJSON(w io.Writer) error {
	texts := make([]string, 0, len(c.Problems))
	for _, p := range c.Problems {
		texts = append(texts, p.String())
	}
	notes := append([]string{}, c.Notes...)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // definitions read as their servers wrote them
	return enc.Encode(map[string]any{"tools": c.Tools, "problems": texts, "notes": notes})
}

// WriteTable writes the tools as an aligned table for a terminal, then,
// after a blank line, the problems and the notes, if any.
func (c Catalog) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSERVER\tORIGINAL\tDESCRIPTION")
	for _, t := range c.Tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Server, t.Original, inert(t.Description))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(c.Problems)+len(c.Notes) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	Problems(w, c.Problems)
	for _, n := range c.Notes {
		fmt.Fprintln(w, "note:", inertLines(n))
	}
	return nil
}
