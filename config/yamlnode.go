package config

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// pair is one key/value entry of a YAML mapping.
type pair struct {
	key string
	k   *yaml.Node
	v   *yaml.Node
}

// maxAliasDepth bounds alias and merge-key chains so hostile input cannot loop.
const maxAliasDepth = 16

// deref follows aliases to the node they name. An alias that cannot be resolved reads
// as null, so callers never see an alias node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasDepth; i++ {
		if n.Alias == nil {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line}
		}
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line}
	}
	return n
}

// isNull reports whether a node is absent or an explicit YAML null.
func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// isMapping reports whether a node is a YAML mapping.
func isMapping(n *yaml.Node) bool {
	n = deref(n)
	return n != nil && n.Kind == yaml.MappingNode
}

// mappingPairs returns the entries of a mapping node. YAML merge keys ("<<: *base") are
// expanded; explicitly written keys win over merged ones, and earlier merges over later.
// Merged entries are returned with merged=true so duplicate checks look only at what the
// user wrote in this mapping.
func mappingPairs(n *yaml.Node) (own, merged []pair) {
	return collectPairs(deref(n), map[*yaml.Node]bool{}, 0)
}

// collectPairs walks merge keys depth first. visited makes each mapping count once, which
// keeps hostile input ("<<: [*a, *a, ...]" nested many times) from growing exponentially;
// a mapping seen before has nothing to add, since earlier merges win.
func collectPairs(n *yaml.Node, visited map[*yaml.Node]bool, depth int) (own, merged []pair) {
	if n == nil || n.Kind != yaml.MappingNode || depth > maxAliasDepth || visited[n] {
		return nil, nil
	}
	visited[n] = true
	var sources []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := ""
		if dk := deref(k); dk.Kind == yaml.ScalarNode {
			key = dk.Value
		}
		if k.Tag == "!!merge" || (key == "<<" && k.Style == 0 && k.Tag != "!!str") {
			v = deref(v)
			if v.Kind == yaml.SequenceNode {
				sources = append(sources, v.Content...)
			} else {
				sources = append(sources, v)
			}
			continue
		}
		own = append(own, pair{key: key, k: k, v: v})
	}
	seen := map[string]bool{}
	for _, p := range own {
		seen[p.key] = true
	}
	for _, src := range sources {
		o, m := collectPairs(deref(src), visited, depth+1)
		for _, p := range append(o, m...) {
			if !seen[p.key] {
				seen[p.key] = true
				merged = append(merged, p)
			}
		}
	}
	return own, merged
}

// closest returns the known key most similar to key, or "" when none is close.
func closest(key string, known []string) string {
	best, bestDist := "", 3
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	for _, k := range known {
		if norm(k) == norm(key) {
			return k
		}
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, computed for short keys only.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
