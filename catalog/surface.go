package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// The lists of a Surface, by the member name of their list result.
const (
	ListResources = "resources"
	ListTemplates = "resourceTemplates"
	ListPrompts   = "prompts"
)

type (
	// ServerLists is what one server lists beyond tools and what it
	// declared, with the config that says what of it is exported and how.
	ServerLists struct {
		Config   *config.Server
		Declared Declared
		// Resources, Templates and Prompts are the server's lists in its own
		// order: each item's key (URI, uriTemplate, name) and its definition
		// as the server sent it.
		Resources, Templates, Prompts []Listed
	}

	// Listed is one item of an upstream's list: the key it is found by
	// and its definition, byte for byte as the upstream sent it.
	Listed struct {
		Key string
		Raw json.RawMessage
	}

	// Declared is what a server declared at its initialize beyond tools.
	Declared struct {
		Resources, Subscribe, Prompts, Completions, Logging bool
		// Extensions is its capabilities' extensions member, raw; nil
		// when absent.
		Extensions json.RawMessage
	}

	// Offers is what the servers of a surface offer together.
	Offers struct {
		Resources, Subscribe, Prompts, Completions, Logging bool
		// ResourceServers and SubscribeServers list the servers that offer
		// resources, and subscriptions to them, in config order.
		ResourceServers, SubscribeServers []string
		// Extensions are the extensions the servers declare, merged (see
		// mergeExtensions); nil when none does.
		Extensions map[string]json.RawMessage
	}

	// Prompt is one exported prompt: its exported name, its server's own
	// name for it, and the server.
	Prompt struct {
		Exported, Original, Server string
	}

	// Surface is the exported catalog beyond tools: resources, resource
	// templates and prompts, with the server that owns each, and their
	// list results rendered once. Like Catalog it is immutable, built
	// whole by NewSurface from the servers' lists in config order, so that
	// the first server in config order keeps a URI or a prompt name two
	// servers offer.
	Surface struct {
		resources map[string]string // URI -> server
		templates []templateEntry
		prompts   map[string]Prompt // exported name -> prompt
		problems  []config.Problem
		offers    Offers
		// hiddenApps are the exported app resource URIs a profile hides
		// with the tools that point at them.
		hiddenApps map[string]bool
		// results are the whole list results, {"resources":[...]} and so
		// on, by list; lists are the arrays inside them.
		results, lists map[string]json.RawMessage
	}

	templateEntry struct {
		server   string
		raw      string // uriTemplate as listed
		template *uritemplate.Template
		loose    *regexp.Regexp // every expression matches any text, "/" included
	}
)

// EmptySurface is the surface of no servers, rendered.
func EmptySurface() *Surface {
	return NewSurface(nil, "", nil)
}

// NewSurface builds the surface of servers, taken in order: each server's
// resources and templates admitted by its resources filters (its ui://
// app resources exported under its own names, but those hidden names),
// its prompts named by its naming rules under pattern, the first server
// keeping a URI, template or prompt name a later one lists too (a problem
// for the later one), and every list's result rendered.
func NewSurface(servers []ServerLists, pattern string, hidden map[string]bool) *Surface {
	s := &Surface{resources: map[string]string{}, prompts: map[string]Prompt{}, hiddenApps: hidden}
	var res, tpl, prm bytes.Buffer
	for _, sl := range servers {
		s.declare(sl.Config.ID, sl.Declared)
		s.addResources(sl, &res)
		s.addTemplates(sl, &tpl)
		s.addPrompts(sl, pattern, &prm)
	}
	s.render(closeList(&res), closeList(&tpl), closeList(&prm))
	return s
}

// declare adds what server declared to what the surface offers.
func (s *Surface) declare(server string, d Declared) {
	o := &s.offers
	o.Resources = o.Resources || d.Resources
	o.Subscribe = o.Subscribe || d.Subscribe
	o.Prompts = o.Prompts || d.Prompts
	o.Completions = o.Completions || d.Completions
	o.Logging = o.Logging || d.Logging
	o.Extensions = mergeExtensions(o.Extensions, d.Extensions)
	if d.Resources {
		o.ResourceServers = append(o.ResourceServers, server)
	}
	if d.Subscribe {
		o.SubscribeServers = append(o.SubscribeServers, server)
	}
}

func (s *Surface) addResources(sl ServerLists, list *bytes.Buffer) {
	cfg, id := sl.Config, sl.Config.ID
	for _, r := range sl.Resources {
		if ok, _, _ := naming.Admit(cfg.Resources.Whitelist, cfg.Resources.Blacklist, r.Key); !ok {
			continue
		}
		uri, raw := r.Key, r.Raw
		if naming.IsAppURI(uri) {
			// An app resource is the server's own, under a name of its own.
			if uri = naming.AppURI(id, uri); s.hiddenApps[uri] {
				continue
			}
			raw = withString(raw, "uri", uri)
		}
		if owner, taken := s.resources[uri]; taken {
			if owner != id {
				s.warn(cfg, fmt.Sprintf("resource %q is also listed by server %q, which comes first in the config and keeps it", uri, owner))
			}
			continue
		}
		s.resources[uri] = id
		appendItem(list, raw)
	}
}

func (s *Surface) addTemplates(sl ServerLists, list *bytes.Buffer) {
	cfg, id := sl.Config, sl.Config.ID
	for _, t := range sl.Templates {
		if ok, _, _ := naming.Admit(cfg.Resources.Whitelist, cfg.Resources.Blacklist, t.Key); !ok {
			continue
		}
		tmpl, raw := t.Key, t.Raw
		if naming.IsAppURI(tmpl) {
			tmpl = naming.AppURI(id, tmpl)
			raw = withString(raw, "uriTemplate", tmpl)
		}
		if owner, taken := s.TemplateOwner(tmpl); taken {
			if owner != id {
				s.warn(cfg, fmt.Sprintf("resource template %q is also listed by server %q, which comes first in the config and keeps it", tmpl, owner))
			}
			continue
		}
		compiled, err := uritemplate.New(tmpl)
		if err != nil {
			s.warn(cfg, fmt.Sprintf("resource template %q is not a valid URI template (%v); it is skipped", tmpl, err))
			continue
		}
		s.templates = append(s.templates, templateEntry{server: id, raw: tmpl, template: compiled, loose: looseTemplate(tmpl)})
		appendItem(list, raw)
	}
}

func (s *Surface) addPrompts(sl ServerLists, pattern string, list *bytes.Buffer) {
	cfg, id := sl.Config, sl.Config.ID
	names := make([]string, len(sl.Prompts))
	raws := make(map[string]json.RawMessage, len(sl.Prompts))
	for i, p := range sl.Prompts {
		names[i] = p.Key
		raws[p.Key] = p.Raw
	}
	plan := naming.ApplyPrompts(promptRules(cfg, pattern), names, func(exported string) (string, bool) {
		if p, ok := s.prompts[exported]; ok {
			return p.Server, true
		}
		return "", false
	})
	for _, np := range plan.Problems {
		s.problems = append(s.problems, config.Problem{Severity: severity(np.Error), File: cfg.File, Server: id, Field: np.Field, Message: np.Message})
	}
	if plan.Failed {
		return
	}
	for _, t := range plan.Tools {
		raw, err := Renamed(raws[t.Original], t.Exported)
		if err != nil {
			s.warn(cfg, fmt.Sprintf("prompt %q has a malformed definition (%v); it is skipped", t.Original, err))
			continue
		}
		s.prompts[t.Exported] = Prompt{Exported: t.Exported, Original: t.Original, Server: id}
		appendItem(list, raw)
	}
}

// render keeps each list inside its whole result, rendered once: a list
// request then copies it only to encode it. Like the catalog's (see
// ToolsResult), neither slice leaves room for an append.
func (s *Surface) render(resources, templates, prompts json.RawMessage) {
	s.results = make(map[string]json.RawMessage, 3)
	s.lists = make(map[string]json.RawMessage, 3)
	wrap := func(key string, list json.RawMessage) {
		result := make([]byte, 0, len(key)+len(list)+5)
		result = append(append(append(result, `{"`...), key...), `":`...)
		start := len(result)
		result = append(append(result, list...), '}')
		s.results[key] = result
		s.lists[key] = result[start : len(result)-1 : len(result)-1]
	}
	wrap(ListResources, resources)
	wrap(ListTemplates, templates)
	wrap(ListPrompts, prompts)
}

// Result is the whole result of the list of kind (ListResources,
// ListTemplates, ListPrompts); nil for another kind. It is shared: never
// write into it.
func (s *Surface) Result(kind string) json.RawMessage { return s.results[kind] }

// List is the array of the list of kind inside its Result.
func (s *Surface) List(kind string) json.RawMessage { return s.lists[kind] }

// Offers is what the surface's servers offer together.
func (s *Surface) Offers() Offers { return s.offers }

// Problems are what building the surface found: names and URIs two
// servers list, templates that do not parse, prompts not exported.
func (s *Surface) Problems() []config.Problem { return s.problems }

// ListsChanged tells which lists differ between two surfaces, as a client
// would see them.
func ListsChanged(a, b *Surface) (resources, prompts bool) {
	resources = !bytes.Equal(a.lists[ListResources], b.lists[ListResources]) || !bytes.Equal(a.lists[ListTemplates], b.lists[ListTemplates])
	prompts = !bytes.Equal(a.lists[ListPrompts], b.lists[ListPrompts])
	return
}

func (s *Surface) warn(cfg *config.Server, msg string) {
	s.problems = append(s.problems, config.Problem{Severity: config.SeverityWarning, File: cfg.File, Server: cfg.ID, Message: msg})
}

func severity(isError bool) config.Severity {
	if isError {
		return config.SeverityError
	}
	return config.SeverityWarning
}

func promptRules(s *config.Server, pattern string) naming.Rules {
	r := naming.Rules{Server: s.ID, Whitelist: s.Prompts.Whitelist, Blacklist: s.Prompts.Blacklist, ValidPattern: pattern}
	for _, t := range s.Transforms {
		r.Transforms = append(r.Transforms, naming.Transform{Suffix: t.Kind == config.TransformSuffix, Add: t.Add, Remove: t.Remove})
	}
	return r
}

// withString returns obj with its member name set to the JSON string v.
func withString(obj json.RawMessage, name, v string) json.RawMessage {
	out, _ := rawjson.Replace(obj, name, func([]byte) ([]byte, bool) { return rawjson.AppendString(nil, v), true })
	return out
}

func appendItem(b *bytes.Buffer, raw json.RawMessage) {
	if b.Len() == 0 {
		b.WriteByte('[')
	} else {
		b.WriteByte(',')
	}
	b.Write(raw)
}

func closeList(b *bytes.Buffer) json.RawMessage {
	if b.Len() == 0 {
		return []byte("[]")
	}
	b.WriteByte(']')
	return b.Bytes()
}
