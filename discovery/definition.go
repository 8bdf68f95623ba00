package discovery

// definitionReader reads a tool definition in one pass, stopping only at
// the members the index wants (title, description, annotations.title, the
// input schema's properties, their titles and descriptions) and stepping
// over everything else. Strings are handed over as written in the JSON,
// escapes included, for eachJSONWord: nothing is decoded or copied.
//
// encoding/json decodes every member it is given a place for and checks
// the whole text first; a tokenizing library reads nested values once per
// level to find their ends. Both cost several times this over the
// megabytes of a large catalog. Definitions reach the index already
// parsed once by the aggregator, so they are valid JSON; on anything else
// the reader stops where it went wrong and keeps what it read.
type definitionReader struct {
	b []byte
	i int
}

// fieldSink receives the strings of a definition, by field.
type fieldSink interface{ add(f field, text []byte) }

// fieldFunc is a fieldSink that calls a function.
type fieldFunc func(field, []byte)

func (fn fieldFunc) add(f field, text []byte) { fn(f, text) }

// readDefinition reads what the index needs of a tool definition; the input
// schema's bytes are kept as they are, for the hit.
func readDefinition(raw []byte, d *doc, add fieldSink) {
	r := &definitionReader{b: raw}
	r.object(func(key []byte) {
		switch string(key) {
		case "title":
			r.text(fieldTitle, add)
		case "description":
			r.text(fieldDescription, add)
		case "annotations":
			if !r.at('{') {
				r.skip()
				return
			}
			r.object(func(key []byte) {
				if string(key) == "title" {
					r.text(fieldTitle, add)
				} else {
					r.skip()
				}
			})
		case "inputSchema":
			start := r.i
			if r.at('{') {
				r.schema(schemaDepth, false, add)
				d.hit.InputSchema = raw[start:r.i]
			} else {
				r.skip()
			}
		default:
			r.skip()
		}
	})
}

// schema reads a JSON schema: the names of its properties, and the titles
// and descriptions of the properties themselves (own is true for a
// property's schema), depth levels deep.
func (r *definitionReader) schema(depth int, own bool, add fieldSink) {
	if !r.at('{') {
		r.skip()
		return
	}
	r.object(func(key []byte) {
		switch string(key) {
		case "title", "description":
			if own {
				r.text(fieldParamText, add)
			} else {
				r.skip()
			}
		case "properties":
			if depth == 0 || !r.at('{') {
				r.skip()
				return
			}
			r.object(func(name []byte) {
				add.add(fieldParamName, name)
				r.schema(depth-1, true, add)
			})
		case "items":
			r.schema(depth, own, add) // an array's items are at its own level
		default:
			r.skip()
		}
	})
}

// text hands a string value to add under f; any other value is skipped.
func (r *definitionReader) text(f field, add fieldSink) {
	if !r.at('"') {
		r.skip()
		return
	}
	if s, ok := r.str(); ok {
		add.add(f, s)
	}
}

// at reports whether the next value starts with c.
func (r *definitionReader) at(c byte) bool {
	r.space()
	return r.i < len(r.b) && r.b[r.i] == c
}

func (r *definitionReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// fail stops the reading: the rest of the text is not read.
func (r *definitionReader) fail() { r.i = len(r.b) }

// object calls member for each member of the object at hand, positioned at
// its value, which member must read or skip.
func (r *definitionReader) object(member func(key []byte)) {
	if !r.at('{') {
		r.fail()
		return
	}
	r.i++
	for {
		if r.at('}') {
			r.i++
			return
		}
		if !r.at('"') {
			r.fail()
			return
		}
		key, ok := r.str()
		if !ok || !r.at(':') {
			r.fail()
			return
		}
		r.i++
		member(key)
		switch {
		case r.at(','):
			r.i++
		case r.at('}'):
		default:
			r.fail()
			return
		}
	}
}

// str reads the string at hand and returns its content as written.
func (r *definitionReader) str() ([]byte, bool) {
	start := r.i + 1
	for j := start; j < len(r.b); j++ {
		switch r.b[j] {
		case '\\':
			j++
		case '"':
			r.i = j + 1
			return r.b[start:j], true
		}
	}
	r.fail()
	return nil, false
}

// skip steps over the value at hand, whatever it is.
func (r *definitionReader) skip() {
	r.space()
	if r.i >= len(r.b) {
		return
	}
	switch r.b[r.i] {
	case '"':
		r.str()
	case '{', '[':
		depth := 0
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case '"':
				if _, ok := r.str(); !ok {
					return
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					r.i++
					return
				}
			}
			r.i++
		}
	default: // a number, true, false or null
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			r.i++
		}
	}
}
