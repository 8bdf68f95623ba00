package rawjson

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// stackAfter runs f on a fresh goroutine and reports the stack memory in
// use just before that goroutine ends.
func stackAfter(f func()) uint64 {
	var m runtime.MemStats
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
		runtime.ReadMemStats(&m)
	}()
	<-done
	return m.StackInuse
}

func TestDeepNestingCostsNoStack(t *testing.T) {
	deep := []byte(strings.Repeat(`[{"a":`, maxDepth/2) + "1" + strings.Repeat("}]", maxDepth/2))
	member := []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`)
	base := stackAfter(func() {})
	var valid bool
	grown := stackAfter(func() { valid = Valid(deep) })
	assert.True(t, valid)
	assert.Less(t, grown, base+256<<10, "Valid of a value nested %d deep grew the stack from %d to %d bytes", maxDepth, base, grown)
	grown = stackAfter(func() { assert.NoError(t, membersErr(member)) })
	assert.Less(t, grown, base+256<<10, "Object over a member nested %d deep grew the stack from %d to %d bytes", maxDepth-1, base, grown)
}

func TestDeepValuesMatchEncodingJSON(t *testing.T) {
	inner := []string{`1`, `"s"`, `{}`, `[]`, `{"a":1,"b":[true,null]}`, `[1,]`, `{"a"}`, `{"a":1,}`, `[1 2]`, `{"a":1]`, `[1}`, `tru`, `{"a":[1],"b":{"c":"d"}}`}
	for _, depth := range []int{recurseDepth - 2, recurseDepth - 1, recurseDepth, recurseDepth + 1, recurseDepth + 3, maxDepth, maxDepth + 1} {
		for _, in := range inner {
			for _, wrap := range []struct{ open, close string }{{`[`, `]`}, {`{"k":`, `}`}, {`[0,{"k":`, `}]`}, {`{"k":[`, `],"z":2}`}} {
				data := []byte(strings.Repeat(wrap.open, depth/2) + in + strings.Repeat(wrap.close, depth/2))
				assert.Equal(t, json.Valid(data), Valid(data), "depth %d, %s in %s%s", depth, in, wrap.open, wrap.close)
				obj := append(append([]byte(`{"m":`), data...), '}')
				var m map[string]json.RawMessage
				assert.Equal(t, json.Unmarshal(obj, &m) == nil, membersErr(obj) == nil, "member at depth %d, %s in %s%s", depth, in, wrap.open, wrap.close)
			}
		}
	}
}

// TestObjectSaysWhenTooDeep: a member nested past MaxDepth is reported as
// ErrTooDeep, one just within it is read, and brackets inside strings or a
// syntax error in a shallow value are not taken for depth.
func TestObjectSaysWhenTooDeep(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	errOf := func(s string) error {
		o := NewObject([]byte(s))
		for o.Next() {
		}
		return o.Err()
	}
	assert.NoError(t, errOf(`{"id":1,"result":`+nest(maxDepth-1)+`}`))
	assert.ErrorIs(t, errOf(`{"id":1,"result":`+nest(maxDepth)+`}`), ErrTooDeep)
	assert.ErrorIs(t, errOf(`{"id":1,"result":`+nest(3*maxDepth)+`}`), ErrTooDeep)
	brackets := `"` + strings.Repeat("[", 2*maxDepth) + `"`
	assert.NotErrorIs(t, errOf(`{"id":1,"result":[`+brackets+`,}`), ErrTooDeep)
	assert.NotErrorIs(t, errOf(`{"id":1,"result":["\"`+brackets[1:]+`,}`), ErrTooDeep)
	assert.NotErrorIs(t, errOf(`{"id":1,"result":[1,}`), ErrTooDeep)
}
