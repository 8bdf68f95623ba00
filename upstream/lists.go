package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Tool is one upstream tool definition exactly as the upstream sent it.
type Tool struct {
	Name string
	Raw  json.RawMessage
}

// Resource is one upstream resource definition exactly as the upstream sent it.
type Resource struct {
	URI string
	Raw json.RawMessage
}

// ResourceTemplate is one upstream resource template exactly as the upstream sent it.
type ResourceTemplate struct {
	URITemplate string
	Raw         json.RawMessage
}

// Prompt is one upstream prompt definition exactly as the upstream sent it.
type Prompt struct {
	Name string
	Raw  json.RawMessage
}

// maxListPages bounds how many pages one list may take, so that a server
// whose cursors never end cannot keep the aggregator listing for ever.
const maxListPages = 1000

// Bounds of one whole list, over all its pages: each page is bounded by the
// message limit, and these keep a server whose pages are each within it
// from growing the aggregator without end. They are far above what a real
// server lists (the largest catalogs have thousands of tools, of a few KiB
// each).
var (
	maxListItems = 50_000
	maxListBytes = 64 << 20
)

// listing names one of the upstream's lists: the method that pages through
// it, the result member that holds the items, the member of an item that
// identifies it, and what else an item needs to be relayed (nil: nothing).
type listing struct {
	method, items, key string
	// vet says why an item, as its members, cannot be relayed, or "".
	vet func(members map[string]json.RawMessage) string
}

var (
	toolsListing     = listing{"tools/list", "tools", "name", vetTool}
	resourcesListing = listing{"resources/list", "resources", "uri", nil}
	templatesListing = listing{"resources/templates/list", "resourceTemplates", "uriTemplate", nil}
	promptsListing   = listing{"prompts/list", "prompts", "name", nil}
)

// vetTool says why a tool cannot be relayed: MCP requires its inputSchema,
// and its outputSchema when it has one, to be a JSON Schema object whose
// type is "object". Clients that check the schema of tools/list (the
// official SDKs do) reject the whole list over one such tool, and with it
// the tools of every other server.
func vetTool(members map[string]json.RawMessage) string {
	if why := objectSchema(members["inputSchema"]); why != "" {
		return "its inputSchema " + why
	}
	if out, ok := members["outputSchema"]; ok && string(out) != "null" {
		if why := objectSchema(out); why != "" {
			return "its outputSchema " + why
		}
	}
	return ""
}

// objectSchema says why raw is not a JSON Schema object of type "object",
// or "".
func objectSchema(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "is missing"
	}
	var schema map[string]json.RawMessage
	if json.Unmarshal(raw, &schema) != nil || schema == nil {
		return "is " + jsonKind(raw) + `, not a JSON Schema object`
	}
	var typ string
	if json.Unmarshal(schema["type"], &typ) != nil || typ != "object" {
		return `does not have "type": "object"`
	}
	return ""
}

// leftOut gathers the items of a list that cannot be relayed, to say so in
// one warning per reason rather than one per item.
type leftOut struct {
	names map[string][]string // by reason: the first few keys
	count map[string]int      // by reason
}

// maxLeftOutNames is how many keys a warning about left-out items names.
const maxLeftOutNames = 10

func (l *leftOut) add(why, key string) {
	if l.count == nil {
		l.names, l.count = map[string][]string{}, map[string]int{}
	}
	l.count[why]++
	if key != "" && len(l.names[why]) < maxLeftOutNames {
		l.names[why] = append(l.names[why], preview([]byte(key)))
	}
}

// notes says, one line per reason, what was left out of the list.
func (l *leftOut) notes(lst listing) []string {
	reasons := make([]string, 0, len(l.count))
	for why := range l.count {
		reasons = append(reasons, why)
	}
	sort.Strings(reasons)
	out := make([]string, 0, len(reasons))
	for _, why := range reasons {
		note := fmt.Sprintf("%s: %d item(s) left out, as they break the MCP schema (%s)", lst.method, l.count[why], why)
		if names := l.names[why]; len(names) > 0 {
			note += ": " + strings.Join(names, ", ")
		}
		out = append(out, note)
	}
	return out
}

// warn logs one warning per reason.
func (l *leftOut) warn(i *Instance, lst listing) {
	for why, n := range l.count {
		args := []any{"server", i.server, "method", lst.method, "count", n}
		if names := l.names[why]; len(names) > 0 {
			args = append(args, lst.key+"s", strings.Join(names, ", "))
		}
		i.log.Warn(fmt.Sprintf("upstream listed items that break the MCP schema; left out (%s)", why), args...)
	}
}

// listItem is one item of a list: its key and its raw definition.
type listItem struct {
	key string
	raw json.RawMessage
}

// list fetches the whole of one list, following pagination. Items without
// their key are left out with a warning; each item stays as the bytes the
// upstream sent.
func (i *Instance) list(ctx context.Context, l listing) ([]listItem, error) {
	var items []listItem
	cursor := ""
	seen := map[string]bool{} // the cursors asked for so far
	total := 0                // bytes of the pages so far
	var skipped leftOut
	defer skipped.warn(i, l)
	if l.method == toolsListing.method {
		defer func() { i.setLeftOut(skipped.notes(l)) }()
	}
	for page := 0; ; page++ {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := i.conn.call(ctx, l.method, params)
		if err != nil {
			return nil, fmt.Errorf("server %q: %s: %w", i.server, l.method, i.explain(ctx, err))
		}
		if total += len(raw); total > maxListBytes {
			return nil, fmt.Errorf("server %q: %s: the list is over %d MiB after %d pages; the aggregator takes no more of one list (filter the server's tools on the server's side, or fix its pagination)",
				i.server, l.method, maxListBytes>>20, page+1)
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("server %q: %s: malformed result: %v", i.server, l.method, err)
		}
		var batch []json.RawMessage
		if v, ok := res[l.items]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &batch); err != nil {
				return nil, fmt.Errorf("server %q: %s: malformed result: %q is not an array: %v", i.server, l.method, l.items, err)
			}
		}
		for _, item := range batch {
			var head map[string]json.RawMessage
			var key string
			if json.Unmarshal(item, &head) != nil || json.Unmarshal(head[l.key], &key) != nil || key == "" {
				skipped.add(fmt.Sprintf("no %s", l.key), "")
				continue
			}
			if l.vet != nil {
				if why := l.vet(head); why != "" {
					skipped.add(why, key)
					continue
				}
			}
			items = append(items, listItem{key: key, raw: item})
		}
		if len(items) > maxListItems {
			return nil, fmt.Errorf("server %q: %s: the list has over %d items after %d pages; the aggregator takes no more of one list (filter on the server's side, or fix its pagination)",
				i.server, l.method, maxListItems, page+1)
		}
		var next string
		if v, ok := res["nextCursor"]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &next); err != nil {
				return nil, fmt.Errorf("server %q: %s: malformed result: nextCursor is not a string", i.server, l.method)
			}
		}
		if next == "" || next == cursor {
			return items, nil
		}
		if seen[next] {
			return nil, violation("server %q: %s: page %d names the cursor %q of an earlier page as the next one; the server's pagination loops (fix its cursors, or have it list everything on one page)",
				i.server, l.method, page+1, preview([]byte(next)))
		}
		if page >= maxListPages {
			return nil, violation("server %q: %s: more than %d pages; the server's pagination does not end", i.server, l.method, maxListPages)
		}
		seen[cursor] = true
		cursor = next
	}
}

// ListTools fetches the upstream's whole tool list, following pagination.
func (i *Instance) ListTools(ctx context.Context) ([]Tool, error) {
	items, err := i.list(ctx, toolsListing)
	if err != nil {
		return nil, err
	}
	tools := make([]Tool, len(items))
	for n, it := range items {
		tools[n] = Tool{Name: it.key, Raw: it.raw}
	}
	if c, ok := i.conn.(*remoteConn); ok {
		c.paramTools.Store(paramSchemas(tools))
	}
	return tools, nil
}

// ListResources fetches the upstream's whole resource list, following pagination.
func (i *Instance) ListResources(ctx context.Context) ([]Resource, error) {
	items, err := i.list(ctx, resourcesListing)
	if err != nil {
		return nil, err
	}
	resources := make([]Resource, len(items))
	for n, it := range items {
		resources[n] = Resource{URI: it.key, Raw: it.raw}
	}
	return resources, nil
}

// ListResourceTemplates fetches the upstream's whole list of resource
// templates, following pagination.
func (i *Instance) ListResourceTemplates(ctx context.Context) ([]ResourceTemplate, error) {
	items, err := i.list(ctx, templatesListing)
	if err != nil {
		return nil, err
	}
	templates := make([]ResourceTemplate, len(items))
	for n, it := range items {
		templates[n] = ResourceTemplate{URITemplate: it.key, Raw: it.raw}
	}
	return templates, nil
}

// ListPrompts fetches the upstream's whole prompt list, following pagination.
func (i *Instance) ListPrompts(ctx context.Context) ([]Prompt, error) {
	items, err := i.list(ctx, promptsListing)
	if err != nil {
		return nil, err
	}
	prompts := make([]Prompt, len(items))
	for n, it := range items {
		prompts[n] = Prompt{Name: it.key, Raw: it.raw}
	}
	return prompts, nil
}

// listAtStart fetches, at once, every list the upstream offers. Only tools
// are essential, and only when the upstream declares them: without its tool
// list an instance cannot serve. The other lists are extras; an upstream
// that fails one starts without it, with a warning.
func (i *Instance) listAtStart(ctx context.Context) error {
	var wg sync.WaitGroup
	var toolsErr error
	wg.Go(func() {
		i.tools, toolsErr = i.ListTools(ctx)
		if toolsErr != nil && !i.caps.Tools {
			// It never said it had tools; many such servers do not answer tools/list.
			i.log.Debug("upstream declares no tools and did not list any", "server", i.server, "err", toolsErr)
			i.tools, toolsErr = nil, nil
		}
	})
	optional := func(what string, list func(context.Context) error) {
		wg.Go(func() {
			if err := list(ctx); err != nil {
				i.log.Warn("upstream failed to list its "+what+"; starting without them", "server", i.server, "err", err)
			}
		})
	}
	if i.caps.Resources {
		optional("resources", func(ctx context.Context) (err error) {
			i.resources, err = i.ListResources(ctx)
			return err
		})
		optional("resource templates", func(ctx context.Context) (err error) {
			i.templates, err = i.ListResourceTemplates(ctx)
			return err
		})
	}
	if i.caps.Prompts {
		optional("prompts", func(ctx context.Context) (err error) {
			i.prompts, err = i.ListPrompts(ctx)
			return err
		})
	}
	wg.Wait()
	return toolsErr
}

// LeftOut says what the latest tools/list of the instance left out, one
// line per reason (tools whose schemas break MCP); nil for nothing.
func (i *Instance) LeftOut() []string {
	if p := i.leftOut.Load(); p != nil {
		return *p
	}
	return nil
}

func (i *Instance) setLeftOut(notes []string) {
	if len(notes) == 0 {
		i.leftOut.Store(nil)
		return
	}
	i.leftOut.Store(&notes)
}

// Tools is the tool list fetched when the instance started.
func (i *Instance) Tools() []Tool { return i.tools }

// Resources is the resource list fetched when the instance started; empty
// when the upstream declares no resources or failed to list them.
func (i *Instance) Resources() []Resource { return i.resources }

// ResourceTemplates is the list of resource templates fetched when the
// instance started; empty when the upstream declares no resources or failed
// to list them.
func (i *Instance) ResourceTemplates() []ResourceTemplate { return i.templates }

// Prompts is the prompt list fetched when the instance started; empty when
// the upstream declares no prompts or failed to list them.
func (i *Instance) Prompts() []Prompt { return i.prompts }
