package discovery

import (
	"encoding/json"
	"runtime"
	"slices"
	"sync"
)

type (
	// Tool is one exported tool as a client sees it in tools/list.
	Tool struct {
		Name     string          // exported name
		Original string          // the upstream's own name ("" when it is Name)
		Server   string          // id of the server that exports it
		Raw      json.RawMessage // the definition, as tools/list renders it
	}

	// Hit is one search result.
	Hit struct {
		Tool        Tool
		Title       string
		Description string
		InputSchema json.RawMessage // the definition's own bytes; {"type":"object"} when it has none
		Score       float64         // higher is better; comparable within one query only
	}

	// Query is one search.
	Query struct {
		Text  string
		Limit int // at most this many hits; <= 0 means DefaultLimit
		// Visible, when set, hides every tool for which it returns false:
		// a search shows no more than the client may see.
		Visible func(name string) bool
	}

	// Index is an immutable search index over one catalog. Build it once
	// per catalog; any number of goroutines may search it.
	Index struct {
		docs     []doc
		postings map[string][]posting
		vocab    []string // every indexed term, for prefix matches
		avgLen   [numFields]float64
	}

	// doc is one indexed tool.
	doc struct {
		hit     Hit
		keys    []string // name keys an exact query is compared with, exported first
		action  int      // how many terms the name has that are not the server's
		lengths [numFields]int
	}

	// posting says how often a term occurs in each field of one doc.
	posting struct {
		doc    int32
		tf     [numFields]uint16
		action bool // the term is one of the doc's name terms that are not the server's
	}
)

// DefaultLimit is the number of hits a Query without a limit returns.
const DefaultLimit = 5

// field is a part of a tool definition that is searched.
type field int

// The fields, from the most telling to the least.
const (
	fieldName        field = iota // the exported name, split into words
	fieldTitle                    // title and annotations.title
	fieldDescription              // description
	fieldParamName                // the input schema's property names
	fieldParamText                // the input schema's property titles and descriptions
	fieldServer                   // the id of the server
	numFields
)

// Field weights and length normalisation (BM25F). A word in a name says more
// about a tool than the same word in a long description; names and titles
// are short, so their length matters less.
var (
	fieldWeight = [numFields]float64{fieldName: 3, fieldTitle: 2, fieldDescription: 1, fieldParamName: 1, fieldParamText: 0.5, fieldServer: 1}
	fieldB      = [numFields]float64{fieldName: 0.3, fieldTitle: 0.3, fieldDescription: 0.75, fieldParamName: 0.5, fieldParamText: 0.75, fieldServer: 0}
)

// k1 bounds how much repeating a term can add (BM25's saturation).
const k1 = 1.2

// schemaDepth is how deep into nested input schemas parameter words are
// read: the properties, and the properties of object (or array of object)
// properties.
const schemaDepth = 2

// emptySchema stands in for a definition without an input schema.
var emptySchema = json.RawMessage(`{"type":"object"}`)

// Why a BM25F of our own: bleve v2.6 (BM25 since v2.5) is the library that
// fits, and a program holding only its in-memory index pulls in 27 modules
// and weighs 21 MB against 2.4 MB without it. This index is a few hundred
// lines, reaches the benchmark's targets (retrieval_test.go), and takes
// only the Porter2 stemmer (kljensen/snowball) from outside.

// Build indexes tools, in the order given (which breaks ties in ranking). A
// definition that is not a JSON object is indexed by its name alone. The
// tools are read in parallel, one contiguous share per CPU.
func Build(tools []Tool) *Index {
	ix := &Index{docs: make([]doc, len(tools))}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(tools)/256))
	shares := make([]share, workers)
	var wg sync.WaitGroup
	for w := range shares {
		lo, hi := w*len(tools)/workers, (w+1)*len(tools)/workers
		wg.Go(func() { shares[w] = ix.read(tools, lo, hi) })
	}
	wg.Wait()

	// The shares hold contiguous, ascending docs, so appending them in order
	// keeps every posting list sorted by doc.
	ix.postings = make(map[string][]posting, len(shares[0].terms))
	var total [numFields]int
	for _, s := range shares {
		for id, term := range s.terms {
			ps, seen := ix.postings[term]
			if !seen {
				ix.vocab = append(ix.vocab, term)
			}
			ix.postings[term] = append(ps, s.lists[id]...)
		}
		for f := range total {
			total[f] += s.total[f]
		}
	}
	for f := range total {
		if len(tools) > 0 {
			ix.avgLen[f] = float64(total[f]) / float64(len(tools))
		}
	}
	return ix
}

// share is what one worker of Build read: the posting lists of its docs,
// by term number.
type share struct {
	terms  []string // term number -> term
	byTerm map[string]int32
	lists  [][]posting // term number -> posting list
	total  [numFields]int
}

// read indexes tools[lo:hi] into ix.docs[lo:hi] and returns their postings.
func (ix *Index) read(tools []Tool, lo, hi int) share {
	s := share{byTerm: map[string]int32{}}
	// ids numbers the words seen: one map access per word of the catalog,
	// the bulk of the work, finds both its term and its posting list.
	ids := map[string]int32{}
	stems := stemmer{}
	for i := lo; i < hi; i++ {
		t := tools[i]
		d := &ix.docs[i]
		d.hit.Tool = t
		d.keys = append(d.keys, nameKey(t.Name))
		if t.Original != "" && t.Original != t.Name {
			d.keys = append(d.keys, nameKey(t.Original))
		}
		count := func(f field) func([]byte) {
			return func(w []byte) {
				id, ok := ids[string(w)]
				if !ok {
					id = -1
					if term := stems.term(w); term != "" {
						id = s.number(term)
					}
					ids[string(w)] = id
				}
				if id < 0 {
					return
				}
				d.lengths[f]++
				ps := s.lists[id]
				if len(ps) == 0 || ps[len(ps)-1].doc != int32(i) {
					ps = append(ps, posting{doc: int32(i)})
					s.lists[id] = ps
				}
				if p := &ps[len(ps)-1]; p.tf[f] < ^uint16(0) {
					p.tf[f]++
				}
			}
		}
		add := func(f field, raw []byte) { eachJSONWord(raw, count(f)) }
		eachWord(t.Name, count(fieldName))
		eachWord(t.Server, count(fieldServer))
		action := nameAction(t, stems)
		d.action = len(action)
		for _, term := range action {
			ps := s.lists[s.byTerm[term]]
			ps[len(ps)-1].action = true // this doc's posting: its name was just read
		}
		readDefinition(t.Raw, d, add)
		if len(d.hit.InputSchema) == 0 {
			d.hit.InputSchema = emptySchema
		}
		for f := range s.total {
			s.total[f] += d.lengths[f]
		}
	}
	return s
}

// nameAction is the distinct terms of a tool's name less those of its
// server (mostly a prefix): what the tool does to what.
func nameAction(t Tool, stems stemmer) []string {
	server := map[string]bool{}
	for _, term := range stems.terms(t.Server) {
		server[term] = true
	}
	var out []string
	for _, term := range stems.terms(t.Name) {
		if !server[term] && !slices.Contains(out, term) {
			out = append(out, term)
		}
	}
	return out
}

// number returns the term number of term, giving it one if it is new.
func (s *share) number(term string) int32 {
	if id, ok := s.byTerm[term]; ok {
		return id
	}
	id := int32(len(s.terms))
	s.byTerm[term] = id
	s.terms = append(s.terms, term)
	s.lists = append(s.lists, nil)
	return id
}

// described fills in a hit's title and description from its definition:
// done for the few tools a search returns, not for every tool indexed.
func described(h Hit) Hit {
	var def struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
	}
	_ = json.Unmarshal(h.Tool.Raw, &def)
	h.Title, h.Description = def.Title, def.Description
	if h.Title == "" {
		h.Title = def.Annotations.Title
	}
	return h
}

// Len is the number of tools indexed.
func (ix *Index) Len() int { return len(ix.docs) }
