package config

// filters reads the resources and prompts sections: whitelist and
// blacklist patterns (with * wildcards) on resource URIs and on original
// prompt names, with the same rules as tools.
func (s *serverReader) filters() {
	for _, kind := range []struct {
		key  string
		what string
		dst  *Filter
	}{{"resources", "resource URIs", &s.srv.Resources}, {"prompts", "original prompt names", &s.srv.Prompts}} {
		p, ok := s.f[kind.key]
		if !ok || !s.mapping(p.v, kind.key, "whitelist, blacklist (patterns on "+kind.what+")") {
			continue
		}
		f := s.fields(p.v, kind.key+".", "whitelist", "blacklist")
		if p, ok := f["whitelist"]; ok {
			kind.dst.Whitelist = s.strings(p.v, kind.key+".whitelist")
		}
		if p, ok := f["blacklist"]; ok {
			kind.dst.Blacklist = s.strings(p.v, kind.key+".blacklist")
		}
	}
}
