package rawjson

import (
	"strings"
	"testing"
)

// Messages of the shapes every call carries: a request's params, an
// answer's envelope, and an answer with a longer text and some escapes.
var benchMessages = map[string][]byte{
	"params": []byte(`{"name":"echo","arguments":{"text":"hello from the benchmark"},"_meta":{"progressToken":17}}`),
	"answer": []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello from the benchmark"}],"isError":false}}`),
	"plain": []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` +
		strings.Repeat(`a line of plain text, as most tools answer with. `, 40) + `"}]}}`),
	"text": []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` +
		strings.Repeat(`line of text with a \"quote\" and a tab\t, `, 50) + `"}],"structuredContent":{"n":[1,2.5,-3e2,true,null]}}}`),
}

func BenchmarkObject(b *testing.B) {
	for name, data := range benchMessages {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				o := NewObject(data)
				for o.Next() {
				}
				if o.Err() != nil {
					b.Fatal(o.Err())
				}
			}
		})
	}
}

func BenchmarkMembers(b *testing.B) {
	names := []string{"jsonrpc", "id", "method", "params", "result", "error"}
	data := benchMessages["answer"]
	b.SetBytes(int64(len(data)))
	var values [6][]byte
	for b.Loop() {
		if err := Members(data, names, values[:]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEdits(b *testing.B) {
	obj := []byte(`{"content":[{"type":"text","text":"hi"}],"_meta":{"a":1},"gone":true}`)
	meta := []byte(`{"b":2}`)
	edits := []Edit{
		{Name: "_meta", Value: func([]byte) []byte { return meta }},
		{Name: "resultType", Value: func([]byte) []byte { return []byte(`"complete"`) }},
		{Name: "gone", Value: func([]byte) []byte { return nil }},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Edits(obj, edits...)
	}
}
