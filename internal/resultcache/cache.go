package resultcache

import (
	"container/list"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Defaults of the bounds, used when New is given zero.
const (
	DefaultMaxBytes   = 64 << 20
	DefaultMaxEntries = 10000
	// MaxTTL caps how long any entry is kept, whatever ttlMs says: an
	// upstream's typo of a year is not kept for a year.
	MaxTTL = 24 * time.Hour
)

type (
	// Key identifies one stored result. Owner is what answered (an upstream
	// instance); Partition is who may be served it (the zero value of a
	// caller's choosing for everyone, else a principal or a lease); Method
	// and Params are the request, Params holding only what affects the
	// result; Subject is what an invalidation names it by (a resource's
	// URI).
	Key struct {
		Owner     any
		Partition any
		Method    string
		Subject   string
		Params    string
	}

	// Cache is a bounded store of fresh results, safe for concurrent use.
	Cache struct {
		maxEntries int

		mu       sync.Mutex
		maxBytes int64      // 0: off
		order    *list.List // of *entry, most recently used first
		byKey    map[Key]*list.Element
		bytes    int64

		hits, misses, stores, evictions atomic.Uint64
	}

	// Stats are a cache's counters since it was made, and its size now.
	Stats struct {
		Hits, Misses, Stores, Evictions uint64
		Entries                         int
		Bytes                           int64
	}

	entry struct {
		key     Key
		value   []byte
		expires time.Time
		size    int64
	}
)

// New returns a cache that holds at most maxEntries results of at most
// maxBytes together (zero: the defaults). A result larger than an eighth of
// maxBytes is never stored, so that one answer cannot empty the cache.
func New(maxEntries int, maxBytes int64) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Cache{maxBytes: maxBytes, maxEntries: maxEntries, order: list.New(), byKey: map[Key]*list.Element{}}
}

// SetMaxBytes changes the bound in bytes, evicting what no longer fits;
// 0 or less turns the cache off: it drops everything and stores nothing
// until a bound is set again.
func (c *Cache) SetMaxBytes(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxBytes = max(n, 0)
	for c.order.Len() > 0 && c.bytes > c.maxBytes {
		c.remove(c.order.Back())
		if c.maxBytes > 0 {
			c.evictions.Add(1)
		}
	}
}

// On reports whether the cache stores anything (its bound is not 0).
func (c *Cache) On() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxBytes > 0
}

// Get returns the stored result of k if it is still fresh at now, with the
// time it stays fresh, and counts a hit; else it counts a miss.
func (c *Cache) Get(k Key, now time.Time) (value []byte, left time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byKey[k]
	if el == nil {
		return nil, 0, false
	}
	e := el.Value.(*entry)
	if left = e.expires.Sub(now); left <= 0 {
		c.remove(el)
		return nil, 0, false
	}
	c.order.MoveToFront(el)
	return e.value, left, true
}

// Count records the outcome of one lookup of a cacheable request: a hit,
// or a miss (none of the keys it may be served under held a fresh result).
func (c *Cache) Count(hit bool) {
	if hit {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
}

// Put stores value under k for ttl from now (capped at MaxTTL), evicting
// the least recently used entries beyond the bounds. A ttl of zero or less
// stores nothing and drops what k held. The cache keeps value: the caller
// must not change it afterwards.
func (c *Cache) Put(k Key, value []byte, ttl time.Duration, now time.Time) {
	size := int64(len(value) + len(k.Method) + len(k.Subject) + len(k.Params) + 128)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byKey[k]; el != nil {
		c.remove(el)
	}
	if ttl <= 0 || size > c.maxBytes/8 {
		return
	}
	ttl = min(ttl, MaxTTL)
	el := c.order.PushFront(&entry{key: k, value: value, expires: now.Add(ttl), size: size})
	c.byKey[k] = el
	c.bytes += size
	c.stores.Add(1)
	for c.bytes > c.maxBytes || len(c.byKey) > c.maxEntries {
		c.remove(c.order.Back())
		c.evictions.Add(1)
	}
}

// Drop removes every entry whose key drop matches, and returns how many.
func (c *Cache) Drop(drop func(Key) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		if drop(el.Value.(*entry).key) {
			c.remove(el)
			n++
		}
		el = next
	}
	return n
}

// Stats returns the counters and the size now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	entries, bytes := len(c.byKey), c.bytes
	c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stores: c.stores.Load(), Evictions: c.evictions.Load(),
		Entries: entries, Bytes: bytes}
}

// remove drops el. Callers hold mu.
func (c *Cache) remove(el *list.Element) {
	e := el.Value.(*entry)
	c.order.Remove(el)
	delete(c.byKey, e.key)
	c.bytes -= e.size
}

// Scope is who a result may be served to, by its cacheScope.
type Scope uint8

// The scopes of cacheScope.
const (
	Private Scope = iota // the same authorization context only
	Public               // anyone
)

// Hints reads a result's caching hints. ok is false for a result that is
// not to be cached: no positive ttlMs (absent, zero and negative all mean
// immediately stale), or a resultType other than "complete" (an
// input_required round is never cached). A cacheScope that is not
// "public" counts as private.
func Hints(result []byte) (ttl time.Duration, scope Scope, ok bool) {
	var hints [3][]byte
	err := rawjson.Members(result, []string{"ttlMs", "cacheScope", "resultType"}, hints[:])
	ttlRaw, scopeRaw, typeRaw := hints[0], hints[1], hints[2]
	if err != nil || ttlRaw == nil {
		return 0, Private, false
	}
	if typeRaw != nil {
		if t, _ := rawjson.String(typeRaw); t != "complete" {
			return 0, Private, false
		}
	}
	ms, err := strconv.ParseFloat(string(ttlRaw), 64)
	if err != nil || ms < 1 {
		return 0, Private, false
	}
	ttl = MaxTTL
	if ms < float64(MaxTTL/time.Millisecond) {
		ttl = time.Duration(ms) * time.Millisecond
	}
	if s, _ := rawjson.String(scopeRaw); s == "public" {
		scope = Public
	}
	return ttl, scope, true
}

// WithTTL returns a copy of result whose ttlMs is left, in whole
// milliseconds: what a result served from the cache still has of its
// freshness. Every other byte stays as the upstream sent it.
func WithTTL(result []byte, left time.Duration) []byte {
	ms := strconv.AppendInt(nil, int64(left/time.Millisecond), 10)
	out, ok := rawjson.Set(result, "ttlMs", func([]byte) []byte { return ms })
	if !ok {
		return result
	}
	return out
}
