// Package breaker is the one circuit breaker of the AI calls: search keeps one around the
// embedding provider, the OpenAI provider one around its chat model. Closed, it lets every call
// through and counts consecutive failures; at the threshold it opens: calls are refused at once
// for the cool-down; then it lets one probe through (half-open): a success closes it, a failure
// opens it again.
package breaker

import (
	"sync"
	"time"
)

// Breaker is safe for concurrent use.
type Breaker struct {
	now       func() time.Time
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	failures int       // consecutive, while closed
	open     bool      // open or half-open
	openedAt time.Time // when it last opened
	probing  bool      // half-open: the probe is out
}

// New returns a closed breaker that opens after threshold consecutive failures, for cooldown;
// now is its clock (nil: time.Now).
func New(now func() time.Time, threshold int, cooldown time.Duration) *Breaker {
	if now == nil {
		now = time.Now
	}
	return &Breaker{now: now, threshold: threshold, cooldown: cooldown}
}

// Threshold is how many consecutive failures open the breaker.
func (b *Breaker) Threshold() int { return b.threshold }

// Cooldown is how long the breaker stays open before it lets a probe through.
func (b *Breaker) Cooldown() time.Duration { return b.cooldown }

// Allow says whether a call may go out; a true answer must be followed by exactly one of
// Success, Failure or Abandon.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true
	}
	if b.probing || b.now().Sub(b.openedAt) < b.cooldown {
		return false
	}
	b.probing = true
	return true
}

// Success: the call showed the provider up; the breaker closes.
func (b *Breaker) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.open, b.probing = 0, false, false
}

// Failure: the provider failed the call.
func (b *Breaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		// The probe failed (or a call let through before the breaker opened): a new cool-down.
		b.openedAt, b.probing = b.now(), false
		return
	}
	b.failures++
	if b.failures >= b.threshold {
		b.open, b.openedAt, b.failures = true, b.now(), 0
	}
}

// Abandon: the call ended without telling anything about the provider (the caller gave up).
func (b *Breaker) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// IsOpen says whether calls are being refused now.
func (b *Breaker) IsOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open && (b.probing || b.now().Sub(b.openedAt) < b.cooldown)
}
