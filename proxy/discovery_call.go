package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/discovery"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// searchTools answers mcp_search_tools under the state o resolved the call
// under, with the tools the caller may see.
func (o *ownServer) searchTools(args json.RawMessage) json.RawMessage {
	if o.st.search == nil {
		// The pair is in the catalog only in search mode, and the view is
		// published with the same catalog; this guards a future mistake.
		return textResult(true, "tool discovery is off; set discovery.mode: search")
	}
	return searchTools(o.st.search.Index, args, o.st.visibility(o.client))
}

// callTool answers an mcp_call_tool call the forwarder did not run as the
// tool it names (resolveTool): the call names no tool the caller can run,
// and the answer says why.
func (o *ownServer) callTool(args json.RawMessage) json.RawMessage {
	if o.st.search == nil {
		return textResult(true, "tool discovery is off; set discovery.mode: search")
	}
	name, _, why := callToolArgs(args)
	if why != nil {
		return why
	}
	return textResult(true, unknownToolText(o.st.search.Index, name, o.st.visibility(o.client)))
}

// searchTools runs one mcp_search_tools call against ix.
// visible, when set, says which tools the caller may see (its profile).
func searchTools(ix *discovery.Index, rawArgs json.RawMessage, visible func(name string) bool) json.RawMessage {
	var args struct {
		Query string   `json:"query"`
		Limit *float64 `json:"limit"`
	}
	if err := json.Unmarshal(rawArgs, &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return textResult(true, `mcp_search_tools needs {"query": "<what you want to do, or a tool name>"} and optionally "limit" (1 to 50, default 5)`)
	}
	if err := discovery.CheckQuery(args.Query); err != nil {
		return textResult(true, "mcp_search_tools: "+err.Error())
	}
	limit := discovery.DefaultLimit
	if args.Limit != nil {
		l := *args.Limit
		if l != math.Trunc(l) || l < 1 {
			return textResult(true, fmt.Sprintf("limit %v: give a whole number from 1 to %d (default %d)", l, maxSearchLimit, discovery.DefaultLimit))
		}
		limit = int(min(l, maxSearchLimit))
	}
	hits := ix.Search(discovery.Query{Text: args.Query, Limit: limit, Visible: visible})
	result := []byte(`{"content":[{"type":"text","text":`)
	result = rawjson.AppendString(result, hitsText(args.Query, hits))
	result = append(result, `}],"structuredContent":`...)
	result = append(result, hitsJSON(hits)...)
	return append(result, '}')
}

// hitsJSON renders the structured result: {"tools": [{name, description,
// inputSchema, server}, ...]}, each input schema as its server wrote it.
func hitsJSON(hits []discovery.Hit) []byte {
	tools := make([][]byte, len(hits))
	for i, h := range hits {
		tools[i] = rawjson.AppendObject(nil,
			rawjson.Field{Name: "name", Value: rawjson.AppendString(nil, h.Tool.Name)},
			rawjson.Field{Name: "description", Value: rawjson.AppendString(nil, h.Description)},
			rawjson.Field{Name: "inputSchema", Value: h.InputSchema},
			rawjson.Field{Name: "server", Value: rawjson.AppendString(nil, h.Tool.Server)})
	}
	return rawjson.AppendObject(nil, rawjson.Field{Name: "tools", Value: rawjson.AppendArray(nil, tools...)})
}

// hitsText is the compact rendering for clients that read only text: each
// tool's name, server, the start of its description and its arguments.
func hitsText(query string, hits []discovery.Hit) string {
	if len(hits) == 0 {
		return fmt.Sprintf("No tool matches %q. Try other words for what you want to do; mcp_status lists the servers.", query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tools for %q, best first. Call one with mcp_call_tool {\"name\": \"<name>\", \"arguments\": {...}}.\n", query)
	for i, h := range hits {
		fmt.Fprintf(&b, "\n%d. %s (server %s)", i+1, h.Tool.Name, h.Tool.Server)
		if d := summary(h.Description); d != "" {
			b.WriteString(": " + d)
		}
		if args := argumentsText(h.InputSchema); args != "" {
			b.WriteString("\n   arguments: " + args)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// summaryLen bounds the description shown per tool in the text rendering.
const summaryLen = 240

// summary is the first paragraph of a description, cut at a word near
// summaryLen.
func summary(desc string) string {
	desc = strings.TrimSpace(desc)
	if i := strings.Index(desc, "\n\n"); i >= 0 {
		desc = desc[:i]
	}
	desc = strings.Join(strings.Fields(desc), " ")
	if len(desc) <= summaryLen {
		return desc
	}
	cut := strings.LastIndexByte(desc[:summaryLen], ' ')
	if cut < summaryLen/2 {
		cut = summaryLen
	}
	return strings.TrimRight(desc[:cut], " ,.;:") + " …"
}

// argumentsText lists an input schema's properties in their order, with
// their types, required ones marked: "path (string, required), head (number)".
func argumentsText(schema json.RawMessage) string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	var parts []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := tok.(string)
		var prop struct {
			Type any `json:"type"`
		}
		if dec.Decode(&prop) != nil {
			break
		}
		var notes []string
		switch t := prop.Type.(type) {
		case string:
			notes = append(notes, t)
		case []any:
			var ts []string
			for _, x := range t {
				if s, ok := x.(string); ok {
					ts = append(ts, s)
				}
			}
			notes = append(notes, strings.Join(ts, "|"))
		}
		if required[name] {
			notes = append(notes, "required")
		}
		if len(notes) > 0 {
			name += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, ", ")
}

// callToolArgs reads mcp_call_tool's arguments: the name of the tool to
// run and its arguments (nil when none were given), or, when they name no
// tool it can run, the result that says why.
func callToolArgs(raw json.RawMessage) (name string, arguments json.RawMessage, why json.RawMessage) {
	var args struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &args); err != nil || args.Name == "" {
		return "", nil, textResult(true, `mcp_call_tool needs {"name": "<tool name from mcp_search_tools>", "arguments": {...}}`)
	}
	switch a := bytes.TrimSpace(args.Arguments); {
	case len(a) == 0 || string(a) == "null":
		args.Arguments = nil
	case a[0] != '{':
		return "", nil, textResult(true, fmt.Sprintf("mcp_call_tool: arguments of %q must be an object, as its inputSchema describes", args.Name))
	}
	if args.Name == callToolName {
		return "", nil, textResult(true, "mcp_call_tool cannot call itself; give the name of the tool you want to run")
	}
	return args.Name, args.Arguments, nil
}

// suggestions is how many close names an unknown name is answered with.
const suggestions = 3

// unknownToolText tells the model a name is unknown and which names come
// closest to it.
func unknownToolText(ix *discovery.Index, name string, visible func(string) bool) string {
	hits := ix.Search(discovery.Query{Text: name, Limit: suggestions, Visible: visible})
	msg := fmt.Sprintf("unknown tool %q: no server exports it.", name)
	if len(hits) > 0 {
		names := make([]string, len(hits))
		for i, h := range hits {
			names[i] = h.Tool.Name
		}
		msg += " Closest: " + strings.Join(names, ", ") + "."
	}
	return msg + " Use mcp_search_tools to find a tool by what it does, then call it by its exact name."
}
