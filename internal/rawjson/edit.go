package rawjson

// The edits below change one member of a JSON object and keep every other
// byte as it came: the aggregator adds what a protocol generation requires
// or maps a name, and never re-encodes a peer's payload to do so. Each
// takes one valid JSON object; anything else is reported or returned as it
// is, as each function says.

// Has reports whether obj is a valid JSON object with a member called name.
func Has(obj []byte, name string) bool {
	found := false
	o := NewObject(obj)
	for o.Next() {
		if string(o.Name()) == name {
			found = true
		}
	}
	return found && o.Err() == nil
}

// Replace returns obj with the value of each member called name replaced
// by with(value), wherever with reports true. It reports whether anything
// was replaced; when nothing was, or obj is not one valid JSON object, obj
// comes back as it is.
func Replace(obj []byte, name string, with func(value []byte) ([]byte, bool)) ([]byte, bool) {
	type edit struct {
		start, end int
		value      []byte
	}
	// A name seldom repeats: its edits fit on the stack.
	var editBuf [4]edit
	edits := editBuf[:0]
	o := NewObject(obj)
	for o.Next() {
		if string(o.Name()) != name {
			continue
		}
		if v, ok := with(o.Value()); ok {
			start, end := o.ValueSpan()
			edits = append(edits, edit{start, end, v})
		}
	}
	if o.Err() != nil || len(edits) == 0 {
		return obj, false
	}
	out := make([]byte, 0, len(obj)+32)
	last := 0
	for _, e := range edits {
		out = append(out, obj[last:e.start]...)
		out = append(out, e.value...)
		last = e.end
	}
	return append(out, obj[last:]...), true
}

// Set returns obj with the value of every member called name replaced by
// value(old), or, when it has none, with name: value(nil) added as its
// first member. It reports false, and returns nil, when obj is not one
// valid JSON object.
func Set(obj []byte, name string, value func(old []byte) []byte) ([]byte, bool) {
	if out, ok := Replace(obj, name, func(old []byte) ([]byte, bool) { return value(old), true }); ok {
		return out, true
	}
	if !validObject(obj) {
		return nil, false
	}
	return insertFirst(obj, name, value(nil)), true
}

// Add returns obj with name: value added as its first member, unless obj
// already has a member of that name. obj comes back as it is when it is
// not one valid JSON object.
func Add(obj []byte, name string, value []byte) []byte {
	if Has(obj, name) || !validObject(obj) {
		return obj
	}
	return insertFirst(obj, name, value)
}

// Without returns obj without its members called name; the others keep
// their bytes and their order (the whitespace between members is not
// kept). obj comes back as it is when it has no such member or is not one
// valid JSON object.
func Without(obj []byte, name string) []byte {
	return WithoutFunc(obj, func(n []byte) bool { return string(n) == name })
}

// WithoutFunc is Without for every member whose name drop reports true.
// drop is given the name unescaped, aliasing obj where it can: it must not
// keep it. Nothing is allocated when every member stays.
func WithoutFunc(obj []byte, drop func(name []byte) bool) []byte {
	type span struct{ start, end int }
	// Most objects keep few members: their spans fit on the stack.
	var keptBuf [8]span
	kept := keptBuf[:0]
	dropped := false
	o := NewObject(obj)
	for o.Next() {
		if drop(o.Name()) {
			dropped = true
			continue
		}
		start, end := o.MemberSpan()
		kept = append(kept, span{start, end})
	}
	if o.Err() != nil || !dropped {
		return obj
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	for i, s := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, obj[s.start:s.end]...)
	}
	return append(out, '}')
}

// Keep returns obj with only the members keep reports true for, each
// with its bytes, in their order (the whitespace between members is not
// kept when one goes); obj itself when every member stays. It reports
// false, and returns nil, when obj is not one valid JSON object.
func Keep(obj []byte, keep func(name string, value []byte) bool) ([]byte, bool) {
	type span struct{ start, end int }
	var kept []span
	dropped := false
	o := NewObject(obj)
	for o.Next() {
		if !keep(string(o.Name()), o.Value()) {
			dropped = true
			continue
		}
		start, end := o.MemberSpan()
		kept = append(kept, span{start, end})
	}
	if o.Err() != nil {
		return nil, false
	}
	if !dropped {
		return obj, true
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	for i, s := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, obj[s.start:s.end]...)
	}
	return append(out, '}'), true
}

// Empty reports whether obj is a JSON object without members.
func Empty(obj []byte) bool {
	o := NewObject(obj)
	return !o.Next() && o.Err() == nil
}

// validObject reports whether obj is one valid JSON object.
func validObject(obj []byte) bool {
	o := NewObject(obj)
	for o.Next() {
	}
	return o.Err() == nil
}

// insertFirst adds name: value right after the opening brace of the valid
// JSON object obj.
func insertFirst(obj []byte, name string, value []byte) []byte {
	open := skipSpace(obj, 0) + 1
	empty := obj[skipSpace(obj, open)] == '}'
	out := make([]byte, 0, len(obj)+len(name)+len(value)+4)
	out = append(out, obj[:open]...)
	out = AppendString(out, name)
	out = append(out, ':')
	out = append(out, value...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, obj[open:]...)
}

// Edit is one member's change, for Edits.
type Edit struct {
	// Name is the member's name.
	Name string
	// Value returns the member's new value given its old one (nil when obj
	// has no such member); returning nil drops the member, or adds none.
	Value func(old []byte) []byte
}

// Edits applies every edit to obj in one pass and one copy: a member
// present is changed where it stands (every repeat of its name), one
// absent is added before the others, in the order of edits. Every other
// byte keeps its place, but for the whitespace between members when a
// member is dropped. obj comes back as it is when it is not one valid JSON
// object.
func Edits(obj []byte, edits ...Edit) []byte {
	// The bookkeeping of the few edits a caller makes stays on the stack.
	var changeBuf [8]Change
	var seenBuf [8]bool
	changes := changeBuf[:0]
	seen := seenBuf[:0]
	if len(edits) > len(seenBuf) {
		seen = make([]bool, len(edits))
	}
	seen = seen[:len(edits)]
	count := 0
	o := NewObject(obj)
	for o.Next() {
		count++
		for i := range edits {
			if string(o.Name()) != edits[i].Name {
				continue
			}
			seen[i] = true
			c := Change{Value: edits[i].Value(o.Value())}
			c.Start, c.End = o.MemberSpan()
			c.ValueStart, c.ValueEnd = o.ValueSpan()
			changes = append(changes, c)
			break
		}
	}
	if o.Err() != nil {
		return obj
	}
	var addBuf [8]Addition
	adds := addBuf[:0]
	for i, e := range edits {
		if seen[i] {
			continue
		}
		if v := e.Value(nil); v != nil {
			adds = append(adds, Addition{Name: e.Name, Value: v})
		}
	}
	return Rewrite(obj, count, adds, changes)
}

// Change is a member of an object that Rewrite changes: its span and its
// value's, as Object reports them (MemberSpan, ValueSpan), and its new
// value; nil drops the member.
type Change struct {
	Start, End           int
	ValueStart, ValueEnd int
	Value                []byte
}

// Addition is a member Rewrite adds: its name (encoded by Rewrite) and its
// value.
type Addition struct {
	Name  string
	Value []byte
}

// Rewrite writes obj, one valid JSON object of count members, again in one
// copy: adds first, in their order, then obj's members with each change
// (in the order of the members they change) applied where it stands. Every
// other byte keeps its place, but for the whitespace between members when a
// member is dropped. The caller scans obj for the changes (with Object), so
// that the one scan also finds whatever else it needs of obj.
func Rewrite(obj []byte, count int, adds []Addition, changes []Change) []byte {
	dropped := false
	size := len(obj)
	for _, a := range adds {
		size += len(a.Name) + len(a.Value) + 4 // quotes, colon, comma; more for a name with escapes
	}
	for _, c := range changes {
		size += len(c.Value)
		dropped = dropped || c.Value == nil
	}
	out := make([]byte, 0, size)
	open := skipSpace(obj, 0) + 1
	out = append(out, obj[:open]...)
	for i, a := range adds {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(AppendString(out, a.Name), ':')
		out = append(out, a.Value...)
	}
	if !dropped {
		// Every member stays where it is: splice the new values in.
		if len(adds) > 0 && count > 0 {
			out = append(out, ',')
		}
		last := open
		for _, c := range changes {
			out = append(out, obj[last:c.ValueStart]...)
			out = append(out, c.Value...)
			last = c.ValueEnd
		}
		return append(out, obj[last:]...)
	}
	// A member goes: write the members again, one after the other.
	first := len(adds) == 0
	next := 0
	o := NewObject(obj)
	for o.Next() {
		start, end := o.MemberSpan()
		edited := next < len(changes) && changes[next].Start == start
		if edited && changes[next].Value == nil {
			next++
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if !edited {
			out = append(out, obj[start:end]...)
			continue
		}
		c := changes[next]
		next++
		out = append(out, obj[start:c.ValueStart]...)
		out = append(out, c.Value...)
		out = append(out, obj[c.ValueEnd:end]...)
	}
	return append(out, '}')
}
