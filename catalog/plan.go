package catalog

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// Plan applies the naming rules to a server's upstream tools (their names
// in upstream order, and each one's definition by name) against the names
// other servers already own, and renders its catalog entries.
func Plan(s *config.Server, names []string, byName map[string]json.RawMessage, cat *Catalog, pattern string) (naming.Plan, []*Entry) {
	plan := naming.Apply(RulesFor(s, pattern), names, func(exported string) (string, bool) {
		owner, ok := cat.Owner(exported)
		if ok && owner != s.ID {
			return owner, true
		}
		return "", false
	})
	entries := make([]*Entry, 0, len(plan.Tools))
	for _, t := range plan.Tools {
		raw, err := Renamed(byName[t.Original], t.Exported)
		if err != nil {
			plan.Problems = append(plan.Problems, naming.Problem{Server: s.ID, Tool: t.Original, Message: "malformed definition skipped: " + err.Error()})
			continue
		}
		raw, app := AppTool(s.ID, raw)
		entries = append(entries, &Entry{Exported: t.Exported, Server: s.ID, Original: t.Original, Raw: raw, Settings: t.Settings,
			TimeoutSetting: timeoutSetting(s, t.Original, t.Settings), ParamHeaders: rawjson.Mentions(raw, "x-mcp-header"),
			TaskSupport: taskSupport(raw), App: app})
	}
	return plan, entries
}

// taskSupport reports whether a tool's definition lets a call run as a
// task: its execution.taskSupport is "optional" or "required".
func taskSupport(raw json.RawMessage) bool {
	support, _ := rawjson.String(rawjson.Member(rawjson.Member(raw, "execution"), "taskSupport"))
	return support == "optional" || support == "required"
}

// timeoutSetting names the setting a tool's timeout (settings, as the
// naming plan merged them) comes from: its tools.config entry's, else
// tools.defaults'; "" when it has none.
func timeoutSetting(s *config.Server, original string, settings naming.Settings) string {
	switch {
	case settings.Timeout <= 0:
		return ""
	case s.Tools.Config[original].Timeout > 0:
		return "tools.config." + original + ".timeout"
	}
	return "tools.defaults.timeout"
}

// RulesFor converts a server's config to naming rules.
func RulesFor(s *config.Server, pattern string) naming.Rules {
	r := naming.Rules{
		Server: s.ID, Whitelist: s.Tools.Whitelist, Blacklist: s.Tools.Blacklist,
		Strict:       s.Tools.Mode == config.ModeStrict,
		Defaults:     naming.Settings(s.Tools.Defaults),
		ValidPattern: pattern,
		Reserved:     config.ReservedServerID,
	}
	if len(s.Tools.Config) > 0 {
		r.Config = make(map[string]naming.Settings, len(s.Tools.Config))
		for k, v := range s.Tools.Config {
			r.Config[k] = naming.Settings(v)
		}
	}
	for _, t := range s.Transforms {
		r.Transforms = append(r.Transforms, naming.Transform{Suffix: t.Kind == config.TransformSuffix, Add: t.Add, Remove: t.Remove})
	}
	return r
}
