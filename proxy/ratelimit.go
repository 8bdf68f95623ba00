package proxy

import (
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// codeRateLimited is the JSON-RPC error code of a call over a rate limit
// (a server error code, -32000 to -32099); its data says when to retry.
const codeRateLimited = -32029

// maxBuckets bounds the rate limiters kept, one per principal and server:
// past it, the full ones (of principals idle long enough to have their
// whole burst back) are forgotten, which changes nothing for them.
const maxBuckets = 50_000

// rateKey is one principal's bucket for one server ("" for all its calls).
type rateKey struct {
	who    identity.Principal
	server string
}

// rateLimits limits each principal's calls (config.RateLimits). A nil
// *rateLimits limits nothing. Safe for concurrent use.
type rateLimits struct {
	cfg     config.RateLimits
	mu      sync.Mutex
	buckets map[rateKey]*rate.Limiter
}

// newRateLimits returns the limits of cfg, nil when it sets none.
func newRateLimits(cfg config.RateLimits) *rateLimits {
	if cfg.Calls == (config.Rate{}) && len(cfg.Servers) == 0 {
		return nil
	}
	return &rateLimits{cfg: cfg, buckets: map[rateKey]*rate.Limiter{}}
}

// same reports whether l limits as cfg does, so that a reload that did not
// change them keeps every principal's bucket.
func (l *rateLimits) same(cfg config.RateLimits) bool {
	if l == nil {
		return cfg.Calls == (config.Rate{}) && len(cfg.Servers) == 0
	}
	return l.cfg.Calls == cfg.Calls && maps.Equal(l.cfg.Servers, cfg.Servers)
}

// take takes one call of who to server from its buckets: the server's,
// then the overall one. When either is empty nothing is taken, and the
// answer is the error to send, saying when to retry, and the limit's name.
func (l *rateLimits) take(who identity.Principal, server string) (*jsonrpc.Error, string) {
	if l == nil {
		return nil, ""
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var taken []*rate.Reservation
	check := func(key rateKey, r config.Rate, setting string) (*jsonrpc.Error, string) {
		if r == (config.Rate{}) {
			return nil, ""
		}
		b := l.bucket(key, r)
		res := b.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			for _, t := range taken {
				t.CancelAt(now)
			}
			return limited(who, server, r, d, setting), setting
		}
		taken = append(taken, res)
		return nil, ""
	}
	if r, ok := l.cfg.Servers[server]; ok {
		if e, rule := check(rateKey{who, server}, r, "rate_limits.servers."+server); e != nil {
			return e, rule
		}
	}
	return check(rateKey{who, ""}, l.cfg.Calls, "rate_limits.calls")
}

// bucket is key's limiter, made full on first use.
func (l *rateLimits) bucket(key rateKey, r config.Rate) *rate.Limiter {
	if b, ok := l.buckets[key]; ok {
		return b
	}
	if len(l.buckets) >= maxBuckets {
		for k, b := range l.buckets {
			if b.Tokens() >= float64(b.Burst()) {
				delete(l.buckets, k)
			}
		}
	}
	b := rate.NewLimiter(rate.Limit(r.PerSecond), r.Burst)
	l.buckets[key] = b
	return b
}

// limited is the error of a call over a limit.
func limited(who identity.Principal, server string, r config.Rate, wait time.Duration, setting string) *jsonrpc.Error {
	secs := math.Ceil(wait.Seconds()*10) / 10
	where := "calls"
	if setting != "rate_limits.calls" {
		where = fmt.Sprintf("calls to server %q", server)
	}
	e := errorObject(codeRateLimited, "rate limited: %s may make %g %s a second (a burst of %d, %s); retry after %gs",
		who, r.PerSecond, where, r.Burst, setting, secs)
	e.Data = []byte(fmt.Sprintf(`{"retryAfterSeconds":%g,"limit":%q}`, secs, setting))
	return e
}

// wait is how long who must wait before a call to server is within its
// limits; it takes nothing (the call takes its tokens when it is made).
func (l *rateLimits) wait(who identity.Principal, server string) time.Duration {
	if l == nil {
		return 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	need := func(key rateKey, r config.Rate) {
		b, ok := l.buckets[key]
		if !ok || r == (config.Rate{}) {
			return
		}
		if tokens := b.TokensAt(now); tokens < 1 {
			if d := time.Duration((1 - tokens) / r.PerSecond * float64(time.Second)); d > longest {
				longest = d
			}
		}
	}
	if r, ok := l.cfg.Servers[server]; ok {
		need(rateKey{who, server}, r)
	}
	need(rateKey{who, ""}, l.cfg.Calls)
	return longest
}

// RateWait is how long who must wait before a call of the tool exported
// as tool is within its rate limits; 0 when it may call now, or when the
// name is no tool (the call is answered as such). The HTTP transport
// refuses such a call with 429 before reading it
// (downstream.HTTPOptions.RateWait).
func (p *Proxy) RateWait(who identity.Principal, tool string) time.Duration {
	st := p.current()
	if st.rates == nil {
		return 0
	}
	server := ""
	if e, ok := st.catalog.Lookup(tool); ok {
		server = e.Server
	}
	return st.rates.wait(who, server)
}
