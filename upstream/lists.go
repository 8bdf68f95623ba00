package upstream

import (
	"context"
	"encoding/json"
	"fmt"
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
// it, the result member that holds the items, and the member of an item
// that identifies it.
type listing struct {
	method, items, key string
}

var (
	toolsListing     = listing{"tools/list", "tools", "name"}
	resourcesListing = listing{"resources/list", "resources", "uri"}
	templatesListing = listing{"resources/templates/list", "resourceTemplates", "uriTemplate"}
	promptsListing   = listing{"prompts/list", "prompts", "name"}
)

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
	total := 0 // bytes of the pages so far
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
				i.log.Warn(fmt.Sprintf("upstream listed an item without a %s; ignored", l.key), "server", i.server, "method", l.method)
				continue
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
		if page >= maxListPages {
			return nil, fmt.Errorf("server %q: %s: more than %d pages; the server's pagination does not end", i.server, l.method, maxListPages)
		}
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
