package resultcache

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHints(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result string
		ttl    time.Duration
		scope  Scope
		ok     bool
	}{
		{"public", `{"contents":[],"ttlMs":60000,"cacheScope":"public"}`, time.Minute, Public, true},
		{"private", `{"ttlMs":1500,"cacheScope":"private"}`, 1500 * time.Millisecond, Private, true},
		{"no scope is private", `{"ttlMs":10}`, 10 * time.Millisecond, Private, true},
		{"an unknown scope is private", `{"ttlMs":10,"cacheScope":"world"}`, 10 * time.Millisecond, Private, true},
		{"complete", `{"resultType":"complete","ttlMs":10,"cacheScope":"public"}`, 10 * time.Millisecond, Public, true},
		{"absent ttl is stale", `{"cacheScope":"public"}`, 0, Private, false},
		{"zero ttl is stale", `{"ttlMs":0,"cacheScope":"public"}`, 0, Private, false},
		{"negative ttl is stale", `{"ttlMs":-5,"cacheScope":"public"}`, 0, Private, false},
		{"a ttl that is no number", `{"ttlMs":"60000","cacheScope":"public"}`, 0, Private, false},
		{"input required is never cached", `{"resultType":"input_required","ttlMs":60000,"cacheScope":"public"}`, 0, Private, false},
		{"capped", `{"ttlMs":1e15,"cacheScope":"public"}`, MaxTTL, Public, true},
		{"not an object", `[1]`, 0, Private, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl, scope, ok := Hints([]byte(tc.result))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.ttl, ttl)
			assert.Equal(t, tc.scope, scope)
		})
	}
}

func TestWithTTLKeepsEverythingElse(t *testing.T) {
	in := `{"contents":[{"uri":"a://x","text":"\u00e9"}],"ttlMs":60000,"cacheScope":"public"}`
	out := WithTTL([]byte(in), 1234567*time.Microsecond)
	assert.Equal(t, `{"contents":[{"uri":"a://x","text":"\u00e9"}],"ttlMs":1234,"cacheScope":"public"}`, string(out))
	assert.Equal(t, `{"contents":[{"uri":"a://x","text":"\u00e9"}],"ttlMs":60000,"cacheScope":"public"}`, in, "the stored copy is not written to")
}

func TestFreshUntilTTL(t *testing.T) {
	c := New(0, 0)
	now := time.Unix(1000, 0)
	k := Key{Owner: "inst", Method: "resources/read", Subject: "a://x", Params: `{"uri":"a://x"}`}
	c.Put(k, []byte(`{"ttlMs":100}`), 100*time.Millisecond, now)

	v, left, ok := c.Get(k, now.Add(40*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, 60*time.Millisecond, left)
	assert.JSONEq(t, `{"ttlMs":100}`, string(v))

	_, _, ok = c.Get(k, now.Add(100*time.Millisecond))
	assert.False(t, ok, "stale at t_received + ttlMs")
	assert.Equal(t, 0, c.Stats().Entries, "a stale entry is dropped when met")
}

func TestKeysDoNotCross(t *testing.T) {
	c := New(0, 0)
	now := time.Unix(1000, 0)
	alice := Key{Owner: "inst", Partition: "alice", Method: "resources/read", Params: "x"}
	c.Put(alice, []byte(`{}`), time.Minute, now)
	for _, other := range []Key{
		{Owner: "inst", Partition: "bob", Method: "resources/read", Params: "x"},
		{Owner: "inst", Method: "resources/read", Params: "x"},
		{Owner: "other", Partition: "alice", Method: "resources/read", Params: "x"},
		{Owner: "inst", Partition: "alice", Method: "resources/read", Params: "y"},
		{Owner: "inst", Partition: "alice", Method: "prompts/get", Params: "x"},
	} {
		_, _, ok := c.Get(other, now)
		assert.False(t, ok, "%+v", other)
	}
	_, _, ok := c.Get(alice, now)
	assert.True(t, ok)
}

func TestBoundsEvictLeastRecentlyUsed(t *testing.T) {
	now := time.Unix(1000, 0)
	key := func(i int) Key { return Key{Owner: "i", Method: "m", Params: fmt.Sprint(i)} }

	c := New(3, 0)
	for i := range 3 {
		c.Put(key(i), []byte(`{}`), time.Minute, now)
	}
	_, _, ok := c.Get(key(0), now) // 0 is now the most recently used
	require.True(t, ok)
	c.Put(key(3), []byte(`{}`), time.Minute, now)
	_, _, ok = c.Get(key(1), now)
	assert.False(t, ok, "the least recently used went first")
	for _, i := range []int{0, 2, 3} {
		_, _, ok := c.Get(key(i), now)
		assert.True(t, ok, "entry %d", i)
	}
	assert.Equal(t, uint64(1), c.Stats().Evictions)

	// Bytes: each entry here is a little over 1 KiB; 16 KiB hold a dozen or so.
	b := New(1000, 16<<10)
	big := []byte(`"` + string(make([]byte, 1000)) + `"`)
	for i := range 20 {
		b.Put(key(i), big, time.Minute, now)
	}
	st := b.Stats()
	assert.LessOrEqual(t, st.Bytes, int64(16<<10))
	assert.Greater(t, st.Entries, 3)
	assert.Less(t, st.Entries, 20)
	_, _, ok = b.Get(key(19), now)
	assert.True(t, ok, "the newest stays")

	// A result over an eighth of the bound is not stored at all.
	b.Put(key(99), make([]byte, 2<<10), time.Minute, now) // 2 KiB and its key
	_, _, ok = b.Get(key(99), now)
	assert.False(t, ok)
}

func TestPutWithoutTTLDropsTheOldEntry(t *testing.T) {
	c := New(0, 0)
	now := time.Unix(1000, 0)
	k := Key{Owner: "i", Method: "m"}
	c.Put(k, []byte(`{}`), time.Minute, now)
	c.Put(k, []byte(`{}`), 0, now)
	_, _, ok := c.Get(k, now)
	assert.False(t, ok)
	assert.Equal(t, Stats{Stores: 1}, c.Stats())
}

func TestDrop(t *testing.T) {
	c := New(0, 0)
	now := time.Unix(1000, 0)
	for _, owner := range []string{"a", "b"} {
		for _, uri := range []string{"x", "y"} {
			for _, who := range []any{nil, "alice"} {
				c.Put(Key{Owner: owner, Partition: who, Method: "resources/read", Subject: uri}, []byte(`{}`), time.Minute, now)
			}
		}
	}
	assert.Equal(t, 2, c.Drop(func(k Key) bool { return k.Owner == "a" && k.Subject == "x" }))
	assert.Equal(t, 2, c.Drop(func(k Key) bool { return k.Owner == "b" && k.Subject == "y" }))
	assert.Equal(t, 4, c.Stats().Entries)
	assert.Equal(t, 4, c.Drop(func(Key) bool { return true }))
	assert.Equal(t, Stats{Stores: 8}, c.Stats())
}

func TestCount(t *testing.T) {
	c := New(0, 0)
	c.Count(true)
	c.Count(false)
	c.Count(false)
	st := c.Stats()
	assert.Equal(t, uint64(1), st.Hits)
	assert.Equal(t, uint64(2), st.Misses)
}

func TestConcurrentUse(t *testing.T) {
	c := New(50, 0)
	now := time.Unix(1000, 0)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 500 {
				k := Key{Owner: g, Method: "m", Params: fmt.Sprint(i % 80)}
				if v, _, ok := c.Get(k, now); ok {
					require.True(t, json.Valid(v))
				}
				c.Put(k, []byte(`{"a":1}`), time.Minute, now)
				if i%100 == 0 {
					c.Drop(func(k Key) bool { return k.Owner == g })
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	assert.LessOrEqual(t, c.Stats().Entries, 50)
}

func TestSetMaxBytes(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(0, 1<<20)
	for i := range 10 {
		c.Put(Key{Owner: "i", Params: fmt.Sprint(i)}, make([]byte, 1000), time.Minute, now)
	}
	c.SetMaxBytes(4 << 10)
	st := c.Stats()
	assert.LessOrEqual(t, st.Bytes, int64(4<<10), "shrunk to the new bound")
	assert.Positive(t, st.Entries)

	c.SetMaxBytes(0)
	assert.False(t, c.On())
	assert.Equal(t, 0, c.Stats().Entries, "off drops everything")
	c.Put(Key{Owner: "i"}, []byte(`{}`), time.Minute, now)
	assert.Equal(t, 0, c.Stats().Entries, "and stores nothing")

	c.SetMaxBytes(1 << 20)
	assert.True(t, c.On())
	c.Put(Key{Owner: "i"}, []byte(`{}`), time.Minute, now)
	assert.Equal(t, 1, c.Stats().Entries)
}
