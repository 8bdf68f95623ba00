package config

import (
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// What a per-principal header can carry of the caller: `{principal: WHAT}`
// in headers. The aggregator fills the value in for each request from the
// principal that request is made for; the config holds only which part.
const (
	PrincipalSubject = "subject" // the OAuth subject (sub) of the caller's access token
	PrincipalClient  = "client"  // the authenticated client's name
	PrincipalIssuer  = "issuer"  // the issuer (iss) of the caller's access token
	// PrincipalClaimPrefix starts claim:NAME, a claim of the caller's access token.
	PrincipalClaimPrefix = "claim:"
)

// maxClaimName bounds the NAME of {principal: claim:NAME}.
const maxClaimName = 128

const principalForms = "subject, client, issuer or claim:NAME"

// isPrincipalRef reports whether a headers value is {principal: ...}.
func isPrincipalRef(n *yaml.Node) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	own, _ := mappingPairs(n)
	return len(own) > 0 && own[0].key == "principal"
}

// principalRef reads {principal: WHAT}; ok is false after a problem.
func (s *serverReader) principalRef(n *yaml.Node, field string) (string, bool) {
	f := s.fields(n, field+".", "principal")
	p, ok := f["principal"]
	if !ok {
		return "", false
	}
	v := deref(p.v)
	if v == nil || v.Kind != yaml.ScalarNode {
		s.errorf(p.v.Line, field, "principal: must be %s, e.g. {principal: subject}", principalForms)
		return "", false
	}
	if !ValidPrincipalSource(v.Value) {
		s.errorf(p.v.Line, field, "principal: %q is not %s; e.g. {principal: subject} or {principal: \"claim:email\"}", safeName(v.Value), principalForms)
		return "", false
	}
	return v.Value, true
}

// ValidPrincipalSource reports whether what names a part of the caller a
// per-principal header can carry: subject, client, issuer or claim:NAME
// (NAME 1 to 128 printable characters without spaces).
func ValidPrincipalSource(what string) bool {
	switch what {
	case PrincipalSubject, PrincipalClient, PrincipalIssuer:
		return true
	}
	name, ok := strings.CutPrefix(what, PrincipalClaimPrefix)
	if !ok || name == "" || len(name) > maxClaimName {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) < 0
}
