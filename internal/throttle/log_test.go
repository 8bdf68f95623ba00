package throttle

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func allowed(t *Log, n int) (ok, skipped int) {
	for range n {
		o, s := t.Allow()
		if o {
			ok++
		}
		skipped += s
	}
	return ok, skipped
}

// Without Summary, the count left out comes with the next interval's
// first line, as the upstream warnings have it.
func TestLogCountsWithTheNextLine(t *testing.T) {
	c := &clock{now: time.Unix(0, 0)}
	l := &Log{Every: time.Minute, Now: c.Now}
	ok, skipped := allowed(l, 100)
	assert.Equal(t, 1, ok, "the first line")
	assert.Zero(t, skipped)
	c.advance(time.Minute)
	o, s := l.Allow()
	assert.True(t, o)
	assert.Equal(t, 99, s, "the next line says how many were left out")
	o, s = l.Allow()
	assert.False(t, o)
	assert.Zero(t, s)
}

// With Burst and Summary, the first few of each interval pass, and the
// rest are summed up once the interval is over.
func TestLogSummarizesEachInterval(t *testing.T) {
	c := &clock{now: time.Unix(0, 0)}
	var mu sync.Mutex
	var summaries []int
	l := &Log{Every: 10 * time.Second, Burst: 5, Now: c.Now, Summary: func(n int) {
		mu.Lock()
		defer mu.Unlock()
		summaries = append(summaries, n)
	}}
	var wg sync.WaitGroup
	var total sync.Map
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, skipped := allowed(l, 750)
			assert.Zero(t, skipped, "with Summary, Allow reports no count")
			total.Store(w, ok)
		}()
	}
	wg.Wait()
	shown := 0
	total.Range(func(_, v any) bool { shown += v.(int); return true })
	assert.Equal(t, 5, shown, "the first five of 3,000")
	l.Flush() // what the end of the interval does
	assert.Equal(t, []int{2995}, summaries)
	l.Flush()
	assert.Equal(t, []int{2995}, summaries, "nothing left out, nothing to say")

	// The first line after the interval, before its timer ran, reports
	// the count itself.
	allowed(l, 7) // the interval's five have passed
	c.advance(10 * time.Second)
	o, _ := l.Allow()
	assert.True(t, o)
	assert.Equal(t, []int{2995, 7}, summaries)
}

// The summary comes without another line: the interval's end sends it.
func TestLogSummaryComesByItself(t *testing.T) {
	done := make(chan int, 100)
	l := &Log{Every: 20 * time.Millisecond, Burst: 1, Summary: func(n int) { done <- n }}
	ok, _ := allowed(l, 100)
	for left := 100 - ok; left > 0; {
		left -= <-done // each line left out is counted in a summary
	}
}
