package discovery

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Bounds of a query: what a search reads of its text. A request says in a
// few words what a tool should do, or names it; a longer text costs more
// to search and finds nothing better.
const (
	MaxQueryBytes = 2048
	MaxQueryWords = 64
)

// CheckQuery reports a query text over MaxQueryBytes or MaxQueryWords,
// saying which and how to fix it. Search reads at most that much of any
// query; CheckQuery lets a caller refuse the rest instead.
func CheckQuery(text string) error {
	const fix = "say in a few words what the tool should do, or give its name"
	if len(text) > MaxQueryBytes {
		return fmt.Errorf("query is %d bytes, over the %d a search reads; %s", len(text), MaxQueryBytes, fix)
	}
	words := 0
	eachWord(text, func([]byte) { words++ })
	if words > MaxQueryWords {
		return fmt.Errorf("query has %d words, over the %d a search reads; %s", words, MaxQueryWords, fix)
	}
	return nil
}

// clipQuery is at most MaxQueryBytes of text, cut before a character
// that would not fit. (The scoring reads no word past the
// MaxQueryWords-th of it.)
func clipQuery(text string) string {
	if len(text) <= MaxQueryBytes {
		return text
	}
	cut := MaxQueryBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

// eachQueryWord is eachWord over the first MaxQueryWords words of text.
func eachQueryWord(text string, fn func(word []byte)) {
	n := 0
	eachWord(text, func(w []byte) {
		if n < MaxQueryWords {
			fn(w)
		}
		n++
	})
}

// Name match tiers: a query that names a tool finds it first, whatever
// the text search thinks of other tools.
const (
	tierNone  = iota
	tierTypo  // within a typo or two of a name ("raed_file")
	tierPart  // the upstream's own name, or the end of the exported one ("read file" finds fs_read_file)
	tierExact // the exported name, case and separators aside
)

// tierBoost lifts a name match above every text score.
const tierBoost = 1e6

// Term weights in a query: the words as written, and, for a word no tool
// contains, the indexed words it begins ("repo" finds repository).
const (
	weightTerm    = 1.0
	weightPrefix  = 0.6
	weightSynonym = 0.5
	// weightAction is added in proportion to how much of a tool's name
	// (less its server) the query names: a request that says all of
	// "connect" finds mongodb_connect before tools that merely mention
	// connections in every parameter list.
	weightAction = 2.0
	minPrefix    = 3  // shortest word that is expanded
	maxPrefix    = 16 // most expansions of one word
)

// Search returns the tools that match q, best first: exact and near-exact
// name matches, then the text search (BM25F over name words, title,
// description, parameter names and descriptions, and server id).
func (ix *Index) Search(q Query) []Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	text := strings.TrimSpace(clipQuery(q.Text))
	if text == "" || len(ix.docs) == 0 {
		return nil
	}
	scores := make([]float64, len(ix.docs))
	ix.scoreNames(text, scores)
	ix.scoreText(text, scores)

	top := make([]int, 0, limit)
	for i, s := range scores {
		if s <= 0 || (q.Visible != nil && !q.Visible(ix.docs[i].hit.Tool.Name)) {
			continue
		}
		// Keep top sorted, best first; on equal scores the earlier tool wins.
		if len(top) == limit && s <= scores[top[len(top)-1]] {
			continue
		}
		at := len(top)
		for at > 0 && scores[top[at-1]] < s {
			at--
		}
		if len(top) < limit {
			top = append(top, 0)
		}
		copy(top[at+1:], top[at:len(top)-1])
		top[at] = i
	}
	hits := make([]Hit, len(top))
	for n, i := range top {
		hits[n] = described(ix.docs[i].hit)
		hits[n].Score = scores[i]
	}
	return hits
}

// scoreNames adds the name match tier of every tool to scores; among typos,
// the closer name comes first.
func (ix *Index) scoreNames(text string, scores []float64) {
	key := nameKey(text)
	if key == "" {
		return
	}
	// Typos are looked for only in what looks like a name: one word or an
	// identifier, never a sentence.
	typos := 0
	if !strings.ContainsAny(text, " \t\r\n") {
		typos = allowedTypos(len(key))
	}
	for i := range ix.docs {
		if t, edits := tierOf(key, ix.docs[i].keys, typos); t != tierNone {
			scores[i] += (float64(t) - float64(edits)/(float64(typos)+1)/2) * tierBoost
		}
	}
}

// allowedTypos is how many edits a name of n bytes may be away from a query.
func allowedTypos(n int) int {
	switch {
	case n >= 10:
		return 2
	case n >= 5:
		return 1
	default:
		return 0
	}
}

// tierOf compares a query key with a tool's name keys (exported first), and
// says how many edits a typo match took.
func tierOf(key string, keys []string, typos int) (tier, edits int) {
	if key == keys[0] {
		return tierExact, 0
	}
	for i, k := range keys {
		if (i > 0 && key == k) || (len(k) > len(key) && strings.HasSuffix(k, key) && k[len(k)-len(key)-1] == '_') {
			return tierPart, 0
		}
	}
	best := typos + 1
	for _, k := range keys {
		best = min(best, editsWithin(key, k, typos))
	}
	if best <= typos {
		return tierTypo, best
	}
	return tierNone, 0
}

// scoreText adds the BM25F score of every tool to scores.
func (ix *Index) scoreText(text string, scores []float64) {
	weights := map[string]float64{}
	stems := stemmer{}
	eachQueryWord(text, func(w []byte) {
		term := stems.term(w)
		if term == "" || weights[term] == weightTerm {
			return
		}
		if _, known := ix.postings[term]; known {
			weights[term] = weightTerm
			return
		}
		if len(term) < minPrefix {
			return
		}
		// No tool has this word: it may be the start of one ("config", "repo").
		n := 0
		for _, longer := range ix.vocab {
			if n == maxPrefix {
				break
			}
			if len(longer) > len(term) && longer[:len(term)] == term {
				n++
				weights[longer] = max(weights[longer], weightPrefix)
			}
		}
	})
	for w, also := range querySynonyms(text) {
		for _, word := range also {
			if term := stems.term([]byte(word)); term != "" && weights[term] == 0 {
				if _, known := ix.postings[term]; known {
					weights[term] = weightSynonym
				}
			}
		}
		_ = w
	}
	n := float64(len(ix.docs))
	var named []float64 // per doc: the share of its name's action terms the query has
	for term, w := range weights {
		ps := ix.postings[term]
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			d := &ix.docs[p.doc]
			tf := 0.0
			for f := field(0); f < numFields; f++ {
				if p.tf[f] == 0 {
					continue
				}
				norm := 1.0
				if ix.avgLen[f] > 0 {
					norm = 1 - fieldB[f] + fieldB[f]*float64(d.lengths[f])/ix.avgLen[f]
				}
				tf += fieldWeight[f] * float64(p.tf[f]) / norm
			}
			scores[p.doc] += w * idf * tf / (k1 + tf)
			if p.action {
				if named == nil {
					named = make([]float64, len(ix.docs))
				}
				named[p.doc] += min(w, weightTerm) / float64(d.action)
			}
		}
	}
	for i, share := range named {
		scores[i] += weightAction * share
	}
}

// querySynonyms maps each word of text that has synonyms to them.
func querySynonyms(text string) map[string][]string {
	out := map[string][]string{}
	eachQueryWord(text, func(w []byte) {
		if also, ok := synonyms[string(w)]; ok {
			out[string(w)] = also
		}
	})
	return out
}

// editsWithin returns how many edits (insert, delete, substitute, or swap
// two neighbours) turn a into b, or k+1 when that is more than k; it gives
// up as soon as a row of the table exceeds k.
func editsWithin(a, b string, k int) int {
	if d := len(a) - len(b); d > k || -d > k {
		return k + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			best = min(best, v)
		}
		if best > k {
			return k + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], k+1)
}
