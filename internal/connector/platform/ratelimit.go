package platform

import (
	"context"
	"math"
	"sync"

	"golang.org/x/time/rate"
)

// Limit is a platform's documented rate limit of one endpoint group, in the form the platforms
// publish: at most Burst requests in any second and at most Steady requests in any minute (0:
// that bound does not apply).
type Limit struct {
	Burst  int // per second
	Steady int // per minute
}

// Limiter is the token buckets that keep one connector under a Limit. A token bucket lets
// burst + rate*t requests through in any window of t, so each bound gets its own bucket sized
// with a margin for network jitter: the per-second one holds half the burst and refills at 45%
// of it per second (at most 95% of Burst in any second); the per-minute one holds a tenth of the
// steady budget (at most Burst) and refills at 85% of it (at most 95% of Steady in any minute).
type Limiter struct {
	buckets []*rate.Limiter
}

// NewLimiter returns the buckets of l; a zero Limit never waits.
func NewLimiter(l Limit) *Limiter {
	var bs []*rate.Limiter
	if l.Burst > 0 {
		bs = append(bs, rate.NewLimiter(rate.Limit(0.45*float64(l.Burst)), max(1, l.Burst/2)))
	}
	if l.Steady > 0 {
		burst := max(1, l.Steady/10)
		if l.Burst > 0 {
			burst = min(burst, l.Burst)
		}
		bs = append(bs, rate.NewLimiter(rate.Limit(0.85*float64(l.Steady)/60), burst))
	}
	return &Limiter{buckets: bs}
}

// Wait blocks until every bucket has a token or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	for _, b := range l.buckets {
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// MaxPerMinute is the most requests the limiter lets through in any minute (for tests).
func (l *Limiter) MaxPerMinute() float64 {
	out := math.Inf(1)
	for _, b := range l.buckets {
		out = math.Min(out, float64(b.Burst())+float64(b.Limit())*60)
	}
	return out
}

// Limiters hands out one Limiter per key (connector and endpoint group), shared by every sync of
// that connector in this process, so back-to-back syncs respect the platform's minute budget
// together. With several worker replicas each holds its own buckets: run one activation worker
// per platform account, or lower the limits.
type Limiters struct {
	mu sync.Mutex
	m  map[string]*Limiter
}

// NewLimiters returns an empty registry.
func NewLimiters() *Limiters { return &Limiters{m: map[string]*Limiter{}} }

// Get returns the key's Limiter, making it with l on first use.
func (r *Limiters) Get(key string, l Limit) *Limiter {
	if r == nil {
		return NewLimiter(l)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lim, ok := r.m[key]; ok {
		return lim
	}
	lim := NewLimiter(l)
	r.m[key] = lim
	return lim
}
