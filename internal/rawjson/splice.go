package rawjson

// AppendToArray returns the JSON object obj with items (each one JSON
// value, written as given) added at the end of the array that is its
// member called name, every other byte of obj as it was: a member whose
// value is no array gets one holding the items in its place, and an object
// without the member gets it, last. With the name more than once, the
// last member counts, as encoding/json reads it. obj that is not one valid
// JSON object is returned as it is, with the error (ErrNotObject,
// ErrTooDeep or a syntax error). The items are not checked.
func AppendToArray(obj []byte, name string, items ...[]byte) ([]byte, error) {
	o := NewObject(obj)
	found, start, end := false, 0, 0
	for o.Next() {
		if string(o.Name()) == name {
			found = true
			start, end = o.ValueSpan()
		}
	}
	if err := o.Err(); err != nil {
		return obj, err
	}
	size := len(obj) + len(name) + 8
	for _, it := range items {
		size += len(it) + 1
	}
	out := make([]byte, 0, size)
	switch {
	case found && obj[start] == '[':
		// Before the array's closing bracket, after a comma unless the
		// array is empty.
		closing := end - 1
		out = append(out, obj[:closing]...)
		empty := skipSpace(obj, start+1) == closing
		for _, it := range items {
			if !empty {
				out = append(out, ',')
			}
			out = append(out, it...)
			empty = false
		}
		return append(out, obj[closing:]...), nil
	case found:
		out = append(out, obj[:start]...)
		out = appendArray(out, items)
		return append(out, obj[end:]...), nil
	}
	// The object's closing brace is its last byte but whitespace.
	closing := len(obj) - 1
	for obj[closing] != '}' {
		closing--
	}
	out = append(out, obj[:closing]...)
	if skipSpace(obj, skipSpace(obj, 0)+1) != closing {
		out = append(out, ',')
	}
	out = AppendString(out, name)
	out = append(out, ':')
	out = appendArray(out, items)
	return append(out, obj[closing:]...), nil
}

// appendArray appends a JSON array of items to b.
func appendArray(b []byte, items [][]byte) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// EditItems returns the JSON object obj with each item of the array that
// is its member called name replaced by edit(item) wherever edit reports
// true, every other byte of obj as it was. It reports whether anything
// was replaced; when nothing was, or obj is not one valid JSON object
// whose member name is an array, obj comes back as it is. With the name
// more than once, the last member counts, as encoding/json reads it. The
// new items are not checked.
func EditItems(obj []byte, name string, edit func(item []byte) ([]byte, bool)) ([]byte, bool) {
	o := NewObject(obj)
	found, start, end := false, 0, 0
	for o.Next() {
		if string(o.Name()) == name {
			found = true
			start, end = o.ValueSpan()
		}
	}
	if o.Err() != nil || !found || obj[start] != '[' {
		return obj, false
	}
	type change struct {
		start, end int
		item       []byte
	}
	var changes []change
	// The array was validated by the object's scan: its items are read
	// here without checks of their own.
	i := skipSpace(obj, start+1)
	for i < end-1 {
		itemEnd, _ := skipValue(obj, i, 2)
		if item, ok := edit(obj[i:itemEnd]); ok {
			changes = append(changes, change{i, itemEnd, item})
		}
		i = skipSpace(obj, itemEnd)
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	if len(changes) == 0 {
		return obj, false
	}
	size := len(obj)
	for _, c := range changes {
		size += len(c.item) - (c.end - c.start)
	}
	out := make([]byte, 0, size)
	last := 0
	for _, c := range changes {
		out = append(out, obj[last:c.start]...)
		out = append(out, c.item...)
		last = c.end
	}
	return append(out, obj[last:]...), true
}
