package discovery

import (
	"bytes"
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
		terms   []docTerm // what the doc holds of each of its terms
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
// definition that is not a JSON object is indexed by its name alone.
func Build(tools []Tool) *Index { return Rebuild(nil, tools) }

// Rebuild indexes tools as Build does, reading again only the tools that
// prev did not hold as they are now: a catalog change (a reload, a server
// restarting with one tool more) costs what changed, not the whole
// catalog. prev may be nil. The tools are read in parallel, one contiguous
// share per CPU.
func Rebuild(prev *Index, tools []Tool) *Index {
	ix := &Index{docs: make([]doc, len(tools))}
	fresh := make([]int, 0, len(tools))
	var known map[string]*doc
	if prev != nil {
		known = make(map[string]*doc, len(prev.docs))
		for i := range prev.docs {
			known[prev.docs[i].hit.Tool.Name] = &prev.docs[i]
		}
	}
	// origin says whose term numbers a doc's terms carry: prev's (0), or
	// those of the worker that read it (1 + its number).
	origin := make([]int, len(tools))
	for i, t := range tools {
		if p := known[t.Name]; p != nil && reusable(p, t) {
			ix.docs[i] = p.moved(t)
			continue
		}
		fresh = append(fresh, i)
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(fresh)/256))
	vocabs := make([][]string, 1+workers)
	if prev != nil {
		vocabs[0] = prev.vocab
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(fresh)/workers, (w+1)*len(fresh)/workers
		for _, i := range fresh[lo:hi] {
			origin[i] = 1 + w
		}
		wg.Go(func() { vocabs[1+w] = ix.read(tools, fresh[lo:hi]) })
	}
	wg.Wait()
	ix.invert(origin, vocabs)
	return ix
}

// reusable reports whether a doc read before indexes t as it is now.
func reusable(d *doc, t Tool) bool {
	o := d.hit.Tool
	return o.Name == t.Name && o.Original == t.Original && o.Server == t.Server && bytes.Equal(o.Raw, t.Raw)
}

// moved is d for t, whose definition has the same bytes as the one d was
// read from: the input schema is taken from t's own bytes, so a rebuilt
// index holds no earlier catalog's memory.
func (d *doc) moved(t Tool) doc {
	out := *d
	out.hit.Tool = t
	if len(d.hit.InputSchema) > 0 && &d.hit.InputSchema[0] != &emptySchema[0] {
		start := cap(d.hit.Tool.Raw) - cap(d.hit.InputSchema)
		out.hit.InputSchema = t.Raw[start : start+len(d.hit.InputSchema)]
	}
	return out
}

// invert numbers the terms of the index and turns the docs' terms into
// posting lists. A doc's terms carry the term numbers of whoever read it
// (vocabs[origin[doc]] names them); each of those numbers is looked up by
// its term once, not once per doc. Every list is cut from one array, in
// doc order.
func (ix *Index) invert(origin []int, vocabs [][]string) {
	n := 0
	for i := range ix.docs {
		n += len(ix.docs[i].terms)
	}
	byTerm := make(map[string]int32, n/16)
	remap := make([][]int32, len(vocabs)) // origin's term number -> ours, -1 when not yet known
	for o, v := range vocabs {
		remap[o] = make([]int32, len(v))
		for j := range remap[o] {
			remap[o][j] = -1
		}
	}
	terms := make([]docTerm, n) // every doc's terms, renumbered
	var df []int32
	var total [numFields]int
	k := 0
	for i := range ix.docs {
		d := &ix.docs[i]
		start := k
		ours := remap[origin[i]]
		for _, dt := range d.terms {
			id := ours[dt.term]
			if id < 0 {
				term := vocabs[origin[i]][dt.term]
				var ok bool
				if id, ok = byTerm[term]; !ok {
					id = int32(len(ix.vocab))
					byTerm[term] = id
					ix.vocab = append(ix.vocab, term)
					df = append(df, 0)
				}
				ours[dt.term] = id
			}
			df[id]++
			dt.term = id
			terms[k] = dt
			k++
		}
		d.terms = terms[start:k:k]
		for f := range total {
			total[f] += d.lengths[f]
		}
	}
	all := make([]posting, n)
	next := make([]int32, len(df)) // where the next posting of each term goes
	at := int32(0)
	for id, c := range df {
		next[id] = at
		at += c
	}
	for i := range ix.docs {
		for _, dt := range ix.docs[i].terms {
			all[next[dt.term]] = posting{doc: int32(i), tf: dt.tf, action: dt.action}
			next[dt.term]++
		}
	}
	ix.postings = make(map[string][]posting, len(df))
	at = 0
	for id, term := range ix.vocab {
		ix.postings[term] = all[at : at+df[id] : at+df[id]]
		at += df[id]
	}
	for f := range total {
		if len(ix.docs) > 0 {
			ix.avgLen[f] = float64(total[f]) / float64(len(ix.docs))
		}
	}
}

// read indexes the tools numbered in which into ix.docs. Their terms carry
// the term numbers of the vocabulary it returns.
func (ix *Index) read(tools []Tool, which []int) []string {
	r := &docReader{byTerm: map[string]int32{}, stems: stemmer{}}
	for _, i := range which {
		t := tools[i]
		d := &ix.docs[i]
		d.hit.Tool = t
		d.keys = append(d.keys, r.key(t.Name))
		if t.Original != "" && t.Original != t.Name {
			d.keys = append(d.keys, r.key(t.Original))
		}
		r.start = len(r.arena)
		r.doc, r.d = int32(i), d
		r.named, r.served = r.named[:0], r.served[:0]
		r.f = fieldName
		scanWords(&r.sc, t.Name, false, r)
		r.f = fieldServer
		scanWords(&r.sc, t.Server, false, r)
		// The name's action: its distinct terms less the server's (mostly
		// a prefix), what the tool does to what.
		for _, id := range r.named {
			if dt := &r.arena[r.slot[id]]; !dt.action && !slices.Contains(r.served, id) {
				dt.action = true
				d.action++
			}
		}
		readDefinition(t.Raw, d, r)
		if len(d.hit.InputSchema) == 0 {
			d.hit.InputSchema = emptySchema
		}
		d.terms = r.arena[r.start:len(r.arena):len(r.arena)]
	}
	return r.terms
}

// docTerm is one term of one doc: how often it occurs in each field.
type docTerm struct {
	term   int32 // its number in the vocabulary of whoever read the doc
	tf     [numFields]uint16
	action bool // one of the doc's name terms that are not the server's
}

// docReader is one worker of Build: it receives the words of each field of
// the doc at hand and counts them into the doc's terms.
type docReader struct {
	ids    wordTable        // word -> term number, -1 for words not indexed
	byTerm map[string]int32 // term -> term number
	terms  []string         // term number -> term
	seen   []int32          // term number -> the last doc that had it
	slot   []int32          // term number -> its place in arena for that doc
	arena  []docTerm        // the terms of the docs read, doc after doc, in chunks
	start  int              // where the doc at hand begins in arena
	stems  stemmer
	sc     scanner
	keyed  keySink
	named  []int32 // the term numbers of the doc's name, in order
	served []int32 // the term numbers of its server's id
	doc    int32   // the doc at hand
	d      *doc
	f      field // the field being read
}

// key is nameKey(text), built in the reader's own buffers.
func (r *docReader) key(text string) string {
	r.keyed.b = r.keyed.b[:0]
	scanWords(&r.sc, text, false, &r.keyed)
	return string(r.keyed.b)
}

// add reads a JSON string's content, as written, as words of field f.
func (r *docReader) add(f field, raw []byte) {
	r.f = f
	scanWords(&r.sc, raw, true, r)
}

// word counts one word of the field at hand. The one map access per word of
// the catalog, the bulk of the work, finds its term.
func (r *docReader) word(w []byte) {
	h := hashWord(w)
	slot, ok := r.ids.find(w, h)
	id := slot.id
	if !ok {
		id = -1
		if term := r.stems.term(w); term != "" {
			id = r.number(term)
		}
		r.ids.put(slot, w, h, id)
	}
	if id < 0 {
		return
	}
	switch r.f {
	case fieldName:
		r.named = append(r.named, id)
	case fieldServer:
		r.served = append(r.served, id)
	}
	r.d.lengths[r.f]++
	if r.seen[id] != r.doc {
		r.seen[id] = r.doc
		if len(r.arena) == cap(r.arena) {
			r.newChunk()
		}
		r.slot[id] = int32(len(r.arena))
		r.arena = append(r.arena, docTerm{term: id})
	}
	if dt := &r.arena[r.slot[id]]; dt.tf[r.f] < ^uint16(0) {
		dt.tf[r.f]++
	}
}

// arenaChunk is how many doc terms the arena holds before it starts a new
// chunk: a full arena is never copied whole, only the terms of the doc at
// hand move, so a catalog's terms are written once.
const arenaChunk = 8192

// newChunk moves the terms of the doc at hand to a new chunk of the arena.
func (r *docReader) newChunk() {
	doc := r.arena[r.start:]
	chunk := make([]docTerm, len(doc), max(arenaChunk, 2*len(doc)))
	copy(chunk, doc)
	for j, dt := range chunk {
		r.slot[dt.term] = int32(j)
	}
	r.arena, r.start = chunk, 0
}

// number returns the term number of term, giving it one if it is new.
func (r *docReader) number(term string) int32 {
	if id, ok := r.byTerm[term]; ok {
		return id
	}
	id := int32(len(r.terms))
	r.byTerm[term] = id
	r.terms = append(r.terms, term)
	r.seen = append(r.seen, -1)
	r.slot = append(r.slot, 0)
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
