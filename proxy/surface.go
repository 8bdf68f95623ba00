package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// Surface is the exported catalog beyond tools: resources, resource
// templates and prompts, with the server that owns each. Like catalog.Catalog it
// is immutable, rebuilt whole on every commit from the running servers in
// config order, so that the first server in config order keeps a URI or a
// prompt name two servers offer.
type Surface struct {
	resources map[string]string // URI -> server
	templates []templateEntry
	prompts   map[string]*promptEntry // exported name -> entry
	problems  []config.Problem

	resourcesJSON, templatesJSON, promptsJSON json.RawMessage
	// results are the whole list results, {"resources":[...]} and so on,
	// by list; each of the lists above is the array inside its result.
	results map[string]json.RawMessage
	// items are the listed items of each list ("resources",
	// "resourceTemplates", "prompts") with their server, for the lists of
	// clients whose profile admits some servers only.
	items map[string][]surfaceItem
	caps  surfaceCaps
	// hiddenApps are the exported app resource URIs a profile hides with
	// the tools that point at them (see state.hiddenApps).
	hiddenApps map[string]bool
}

type templateEntry struct {
	server   string
	raw      string // uriTemplate as listed
	template *uritemplate.Template
	loose    *regexp.Regexp // every expression matches any text, "/" included
}

type surfaceItem struct {
	server string
	raw    json.RawMessage
}

type promptEntry struct {
	exported, original, server string
}

// surfaceCaps is what the enabled servers offer together.
type surfaceCaps struct {
	resources, subscribe, prompts, completions, logging bool
	// resourceServers and subscribeServers list the servers that offer
	// resources, and subscriptions, in config order.
	resourceServers, subscribeServers []string
	// extensions are the extensions the servers declare, merged by
	// mergeExtensions; nil when none does.
	extensions map[string]json.RawMessage
}

func emptySurface() *Surface {
	s := &Surface{resources: map[string]string{}, prompts: map[string]*promptEntry{}, items: map[string][]surfaceItem{}}
	s.render([]byte("[]"), []byte("[]"), []byte("[]"))
	return s
}

// render keeps each list inside its whole result, rendered once: a list
// request then copies it only to encode it. Like the catalog's (see
// catalog.ToolsResult), neither slice leaves room for an append.
func (s *Surface) render(resources, templates, prompts json.RawMessage) {
	s.results = make(map[string]json.RawMessage, 3)
	wrap := func(key string, list json.RawMessage) json.RawMessage {
		result := make([]byte, 0, len(key)+len(list)+5)
		result = append(append(append(result, `{"`...), key...), `":`...)
		start := len(result)
		result = append(append(result, list...), '}')
		s.results[key] = result
		return result[start : len(result)-1 : len(result)-1]
	}
	s.resourcesJSON = wrap(listResources, resources)
	s.templatesJSON = wrap(listTemplates, templates)
	s.promptsJSON = wrap(listPrompts, prompts)
}

// buildSurface renders the surface of servers, taken in order.
func buildSurface(order []string, servers map[string]*runningServer, pattern string) *Surface {
	return buildSurfaceHiding(order, servers, pattern, nil)
}

// buildSurfaceHiding renders the surface of servers, taken in order,
// without the exported app resources hidden names.
func buildSurfaceHiding(order []string, servers map[string]*runningServer, pattern string, hidden map[string]bool) *Surface {
	s := emptySurface()
	s.hiddenApps = hidden
	var res, tpl, prm bytes.Buffer
	for _, id := range order {
		rs := servers[id]
		if rs == nil {
			continue
		}
		caps := rs.caps
		s.caps.resources = s.caps.resources || caps.Resources
		s.caps.subscribe = s.caps.subscribe || caps.ResourcesSubscribe
		s.caps.prompts = s.caps.prompts || caps.Prompts
		s.caps.completions = s.caps.completions || caps.Completions
		s.caps.logging = s.caps.logging || caps.Logging
		s.caps.extensions = mergeExtensions(s.caps.extensions, caps.Extensions)
		if caps.Resources {
			s.caps.resourceServers = append(s.caps.resourceServers, id)
		}
		if caps.ResourcesSubscribe {
			s.caps.subscribeServers = append(s.caps.subscribeServers, id)
		}
		for _, r := range rs.resources {
			if ok, _, _ := naming.Admit(rs.cfg.Resources.Whitelist, rs.cfg.Resources.Blacklist, r.URI); !ok {
				continue
			}
			uri, raw := r.URI, r.Raw
			if naming.IsAppURI(uri) {
				// An app resource is the server's own, under a name of its own.
				if uri = naming.AppURI(id, uri); s.hiddenApps[uri] {
					continue
				}
				raw = withMember(raw, "uri", uri)
			}
			if owner, taken := s.resources[uri]; taken {
				if owner != id {
					s.warn(rs.cfg, fmt.Sprintf("resource %q is also listed by server %q, which comes first in the config and keeps it", uri, owner))
				}
				continue
			}
			s.resources[uri] = id
			appendItem(&res, raw)
			s.items[listResources] = append(s.items[listResources], surfaceItem{id, raw})
		}
		for _, t := range rs.templates {
			if ok, _, _ := naming.Admit(rs.cfg.Resources.Whitelist, rs.cfg.Resources.Blacklist, t.URITemplate); !ok {
				continue
			}
			tmpl, raw := t.URITemplate, t.Raw
			if naming.IsAppURI(tmpl) {
				tmpl = naming.AppURI(id, tmpl)
				raw = withMember(raw, "uriTemplate", tmpl)
			}
			if owner, taken := s.templateOwner(tmpl); taken {
				if owner != id {
					s.warn(rs.cfg, fmt.Sprintf("resource template %q is also listed by server %q, which comes first in the config and keeps it", tmpl, owner))
				}
				continue
			}
			compiled, err := uritemplate.New(tmpl)
			if err != nil {
				s.warn(rs.cfg, fmt.Sprintf("resource template %q is not a valid URI template (%v); it is skipped", tmpl, err))
				continue
			}
			s.templates = append(s.templates, templateEntry{server: id, raw: tmpl, template: compiled, loose: looseTemplate(tmpl)})
			appendItem(&tpl, raw)
			s.items[listTemplates] = append(s.items[listTemplates], surfaceItem{id, raw})
		}
		names := make([]string, len(rs.prompts))
		raws := make(map[string]json.RawMessage, len(rs.prompts))
		for i, p := range rs.prompts {
			names[i] = p.Name
			raws[p.Name] = p.Raw
		}
		plan := naming.ApplyPrompts(promptRules(rs.cfg, pattern), names, func(exported string) (string, bool) {
			if e, ok := s.prompts[exported]; ok {
				return e.server, true
			}
			return "", false
		})
		for _, np := range plan.Problems {
			s.problems = append(s.problems, config.Problem{Severity: severity(np.Error), File: rs.cfg.File, Server: id, Field: np.Field, Message: np.Message})
		}
		if plan.Failed {
			continue
		}
		for _, t := range plan.Tools {
			raw, err := catalog.Renamed(raws[t.Original], t.Exported)
			if err != nil {
				s.warn(rs.cfg, fmt.Sprintf("prompt %q has a malformed definition (%v); it is skipped", t.Original, err))
				continue
			}
			s.prompts[t.Exported] = &promptEntry{exported: t.Exported, original: t.Original, server: id}
			appendItem(&prm, raw)
			s.items[listPrompts] = append(s.items[listPrompts], surfaceItem{id, raw})
		}
	}
	s.render(closeList(&res), closeList(&tpl), closeList(&prm))
	return s
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

// resourceOwner says which server serves uri: the one that listed it, else
// the first whose template matches it (by RFC 6570, else loosely: servers
// often fill a simple {path} with a path that has slashes).
func (s *Surface) resourceOwner(uri string) (string, bool) {
	if server, app, ok := s.appOwner(uri); app {
		return server, ok
	}
	if id, ok := s.resources[uri]; ok {
		return id, true
	}
	for _, t := range s.templates {
		if t.template.Match(uri) != nil {
			return t.server, true
		}
	}
	for _, t := range s.templates {
		if t.loose.MatchString(uri) {
			return t.server, true
		}
	}
	return "", false
}

var expression = regexp.MustCompile(`\{[^}]*\}`)

// looseTemplate matches what a template's literal parts allow, whatever
// fills its expressions.
func looseTemplate(tmpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range expression.FindAllStringIndex(tmpl, -1) {
		b.WriteString(regexp.QuoteMeta(tmpl[last:m[0]]))
		b.WriteString(".*")
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(tmpl[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// soleServer is the only server that offers resources (or, for
// subscriptions, subscriptions to them): a URI it did not list may still
// be one it serves, and with no other candidate it is the one to ask.
func (s *Surface) soleServer(subscribe bool) (string, bool) {
	list := s.caps.resourceServers
	if subscribe {
		list = s.caps.subscribeServers
	}
	if len(list) == 1 {
		return list[0], true
	}
	return "", false
}

// promptOwner says which server exports the prompt named name.
func (s *Surface) promptOwner(name string) (string, bool) {
	e, ok := s.prompts[name]
	if !ok {
		return "", false
	}
	return e.server, true
}

// templateOwner says which server listed a resource template.
func (s *Surface) templateOwner(raw string) (string, bool) {
	for _, t := range s.templates {
		if t.raw == raw {
			return t.server, true
		}
	}
	return "", false
}

// Counts reports how many resources, templates and prompts server exports.
func (s *Surface) Counts(server string) (resources, templates, prompts int) {
	for _, id := range s.resources {
		if id == server {
			resources++
		}
	}
	for _, t := range s.templates {
		if t.server == server {
			templates++
		}
	}
	for _, p := range s.prompts {
		if p.server == server {
			prompts++
		}
	}
	return
}

// listsChanged tells which lists differ between two surfaces, as a client
// would see them.
func listsChanged(a, b *Surface) (resources, prompts bool) {
	resources = !bytes.Equal(a.resourcesJSON, b.resourcesJSON) || !bytes.Equal(a.templatesJSON, b.templatesJSON)
	prompts = !bytes.Equal(a.promptsJSON, b.promptsJSON)
	return
}
