package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// tools reads the tools section: filters, mode, defaults and per-tool settings.
func (s *serverReader) tools() {
	p, ok := s.f["tools"]
	if !ok || !s.mapping(p.v, "tools", "whitelist, blacklist, mode, defaults, config") {
		return
	}
	f := s.fields(p.v, "tools.", "whitelist", "blacklist", "mode", "defaults", "config")
	t := &s.srv.Tools
	if p, ok := f["whitelist"]; ok {
		t.Whitelist = s.strings(p.v, "tools.whitelist")
	}
	if p, ok := f["blacklist"]; ok {
		t.Blacklist = s.strings(p.v, "tools.blacklist")
	}
	if p, ok := f["mode"]; ok {
		if v, ok := s.text(p.v, "tools.mode"); ok {
			switch ToolMode(v.s) {
			case ModeDynamic, ModeStrict:
				t.Mode = ToolMode(v.s)
			default:
				s.errorf(p.v.Line, "tools.mode", "%s is not a mode; use dynamic (the default: unconfigured tools get tools.defaults) or strict (every admitted tool must be listed in tools.config)", v.quoted())
			}
		}
	}
	if p, ok := f["defaults"]; ok {
		t.Defaults = s.toolSettings(p.v, "tools.defaults")
	}
	if p, ok := f["config"]; ok && s.mapping(p.v, "tools.config", "original tool name: {timeout, max_instances}") {
		own, merged := mappingPairs(p.v)
		t.Config = make(map[string]ToolSettings, len(own)+len(merged))
		for _, e := range append(own, merged...) {
			field := "tools.config." + e.key
			if _, dup := t.Config[e.key]; dup {
				s.errorf(e.k.Line, field, "configured more than once; keep one")
				continue
			}
			t.Config[e.key] = s.toolSettings(e.v, field)
		}
	}
}

// toolSettings reads {timeout, max_instances}; an empty value means "listed, no overrides".
func (s *serverReader) toolSettings(n *yaml.Node, field string) ToolSettings {
	var ts ToolSettings
	if !s.mapping(n, field, "timeout, max_instances") {
		return ts
	}
	f := s.fields(n, field+".", "timeout", "max_instances")
	if p, ok := f["timeout"]; ok {
		ts.Timeout, _ = s.duration(p.v, field+".timeout")
	}
	if p, ok := f["max_instances"]; ok {
		ts.MaxInstances, _ = s.count(p.v, field+".max_instances")
	}
	return ts
}

// transformForms lists the supported transform steps for messages.
const transformForms = "supported: prefix: 'name_', prefix: {remove: 'old_', add: 'new_'}, suffix: '_name'"

// transforms reads the ordered list of rename steps.
func (s *serverReader) transforms() {
	p, ok := s.f["transform"]
	if !ok || isNull(p.v) {
		return
	}
	list := deref(p.v)
	if list.Kind != yaml.SequenceNode {
		s.errorf(p.v.Line, "transform", "must be a list of steps, e.g. [{prefix: 'name_'}]; %s", transformForms)
		return
	}
	for i, item := range list.Content {
		field := fmt.Sprintf("transform[%d]", i)
		own, merged := mappingPairs(item)
		steps := append(own, merged...)
		if !isMapping(item) || len(steps) != 1 {
			s.errorf(item.Line, field, "each step is a mapping with exactly one key; %s", transformForms)
			continue
		}
		step := steps[0]
		switch step.key {
		case "prefix":
			if isMapping(step.v) {
				f := s.fields(step.v, field+".prefix.", "remove", "add")
				var t Transform
				t.Kind = TransformPrefix
				if p, ok := f["remove"]; ok {
					v, _ := s.text(p.v, field+".prefix.remove")
					t.Remove = v.s
				}
				if p, ok := f["add"]; ok {
					v, _ := s.text(p.v, field+".prefix.add")
					t.Add = v.s
				}
				s.srv.Transforms = append(s.srv.Transforms, t)
				continue
			}
			if v, ok := s.text(step.v, field+".prefix"); ok {
				s.srv.Transforms = append(s.srv.Transforms, Transform{Kind: TransformPrefix, Add: v.s})
			}
		case "suffix":
			if v, ok := s.text(step.v, field+".suffix"); ok {
				s.srv.Transforms = append(s.srv.Transforms, Transform{Kind: TransformSuffix, Add: v.s})
			}
		default:
			hint := ""
			if c := closest(step.key, []string{"prefix", "suffix"}); c != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", c)
			}
			s.errorf(step.k.Line, field, "unknown transform %q%s; %s", safeName(step.key), hint, transformForms)
		}
	}
}

// lease reads the per-session instance settings.
func (s *serverReader) lease() {
	p, ok := s.f["lease"]
	keys := []string{"idle_ttl", "max_instances", "prewarm", "queue_timeout", "max_age", "max_calls"}
	if !ok || !s.mapping(p.v, "lease", strings.Join(keys, ", ")) {
		return
	}
	f := s.fields(p.v, "lease.", keys...)
	l := &s.srv.Lease
	if p, ok := f["idle_ttl"]; ok {
		l.IdleTTL, _ = s.duration(p.v, "lease.idle_ttl")
	}
	if p, ok := f["max_instances"]; ok {
		l.MaxInstances, _ = s.count(p.v, "lease.max_instances")
	}
	if p, ok := f["prewarm"]; ok {
		l.Prewarm, _ = s.count(p.v, "lease.prewarm")
	}
	if p, ok := f["queue_timeout"]; ok {
		l.QueueTimeout, _ = s.duration(p.v, "lease.queue_timeout")
	}
	if p, ok := f["max_age"]; ok {
		l.MaxAge, _ = s.duration(p.v, "lease.max_age")
	}
	if p, ok := f["max_calls"]; ok {
		l.MaxCalls, _ = s.count(p.v, "lease.max_calls")
	}
	if l.MaxInstances > 0 && l.Prewarm > l.MaxInstances {
		s.warnf(p.v.Line, "lease.prewarm", "%d spare instances exceed lease.max_instances (%d); lower prewarm", l.Prewarm, l.MaxInstances)
	}
}

// errorCause drops the path wrapper of file errors; the path is already in the message.
func errorCause(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}

// containsLineBreak reports whether a header value would split the header.
func containsLineBreak(v string) bool { return strings.ContainsAny(v, "\r\n") }
