package catalog

import (
	"regexp"
	"slices"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// ResourceOwner says which server serves uri: for an exported app resource
// the server its name carries, else the one that listed uri, else the
// first whose template matches it (by RFC 6570, else loosely: servers
// often fill a simple {path} with a path that has slashes).
func (s *Surface) ResourceOwner(uri string) (string, bool) {
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

// appOwner says which server serves the exported app resource uri: the
// server its name carries, when that server offers resources in this
// surface and the URI is not hidden from it.
func (s *Surface) appOwner(uri string) (server string, app, ok bool) {
	server, _, app = naming.AppOriginal(uri)
	if !app {
		return "", false, false
	}
	if s.hiddenApps[uri] || !slices.Contains(s.offers.ResourceServers, server) {
		return "", true, false
	}
	return server, true, true
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

// SoleServer is the only server that offers resources (or, for
// subscriptions, subscriptions to them): a URI it did not list may still
// be one it serves, and with no other candidate it is the one to ask.
func (s *Surface) SoleServer(subscribe bool) (string, bool) {
	list := s.offers.ResourceServers
	if subscribe {
		list = s.offers.SubscribeServers
	}
	if len(list) == 1 {
		return list[0], true
	}
	return "", false
}

// Prompt returns the prompt exported as name.
func (s *Surface) Prompt(name string) (Prompt, bool) {
	p, ok := s.prompts[name]
	return p, ok
}

// PromptOwner says which server exports the prompt named name.
func (s *Surface) PromptOwner(name string) (string, bool) {
	p, ok := s.prompts[name]
	return p.Server, ok
}

// TemplateOwner says which server listed the resource template raw, as
// exported.
func (s *Surface) TemplateOwner(raw string) (string, bool) {
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
		if p.Server == server {
			prompts++
		}
	}
	return
}
