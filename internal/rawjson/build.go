package rawjson

// Field is one member of an object AppendObject writes: its name, and its
// value as JSON bytes, a peer's or built here.
type Field struct {
	Name  string
	Value []byte
}

// AppendObject appends to b the JSON object of fields, in their order:
// each name as a JSON string, each value as the bytes it holds. A value
// that is not one valid JSON value (nothing, a fragment, two values) is
// written as null, so that what a peer sent never breaks the message it is
// embedded in; a value is never re-encoded.
func AppendObject(b []byte, fields ...Field) []byte {
	b = append(b, '{')
	for i, m := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, m.Name)
		b = append(b, ':')
		b = appendValue(b, m.Value)
	}
	return append(b, '}')
}

// AppendArray appends to b the JSON array of items, in their order, each
// as the bytes it holds; an item that is not one valid JSON value is
// written as null, as in AppendObject.
func AppendArray(b []byte, items ...[]byte) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendValue(b, it)
	}
	return append(b, ']')
}

// appendValue appends v when it is one valid JSON value, else null.
func appendValue(b, v []byte) []byte {
	if !Valid(v) {
		return append(b, "null"...)
	}
	return append(b, v...)
}
