package config

import (
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// A stdio server's environment is a safe base of the host's variables (HOME, PATH, the
// locale...), the variables it sets itself under env, and the host variables it names
// under inherit_env; nothing else of the host reaches it. The base is the upstream
// package's business; here is only what a server asks for.

// inheritPattern is a variable name in which * matches any run of characters.
var inheritPattern = regexp.MustCompile(`^[A-Za-z0-9_*]+$`)

// inheritEnv reads inherit_env: true (every host variable), false (the base only, the
// default) or a list of names and * patterns (AWS_*).
func (s *serverReader) inheritEnv() {
	p, ok := s.f["inherit_env"]
	if !ok || isNull(p.v) {
		return
	}
	v := deref(p.v)
	if v.Kind == yaml.ScalarNode {
		if b, err := strconv.ParseBool(v.Value); err == nil {
			if b {
				s.srv.InheritEnv = []string{"*"}
			}
			return
		}
	}
	if v.Kind != yaml.SequenceNode {
		s.errorf(v.Line, "inherit_env", "must be true, false or a list of host variable names (* matches any run of characters, e.g. [AWS_*, KUBECONFIG])")
		return
	}
	items, _ := s.list(v, "inherit_env")
	for i, t := range items {
		if !inheritPattern.MatchString(t.s) {
			s.errorf(v.Content[i].Line, "inherit_env", "%s is not a variable name or pattern; use letters, digits, _ and *", t.quoted())
			continue
		}
		s.srv.InheritEnv = append(s.srv.InheritEnv, t.s)
	}
}
