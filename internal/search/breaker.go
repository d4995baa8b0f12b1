package search

import (
	"sync"
	"time"
)

// breaker is a circuit breaker around the embedding provider. Closed, it lets every call through
// and counts consecutive failures; at threshold it opens: calls are refused at once for cooldown;
// then it lets one probe through (half-open): a success closes it, a failure opens it again.
type breaker struct {
	now       func() time.Time
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	failures int       // consecutive, while closed
	open     bool      // open or half-open
	openedAt time.Time // when it last opened
	probing  bool      // half-open: the probe is out
}

func newBreaker(now func() time.Time, threshold int, cooldown time.Duration) *breaker {
	return &breaker{now: now, threshold: threshold, cooldown: cooldown}
}

// allow says whether a call may go out; a true answer must be followed by exactly one of
// success, failure or abandon.
func (b *breaker) allow() bool {
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

func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.open, b.probing = 0, false, false
}

func (b *breaker) failure() {
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

// abandon: the call ended without telling anything about the provider (the caller gave up).
func (b *breaker) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// isOpen says whether calls are being refused now.
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open && (b.probing || b.now().Sub(b.openedAt) < b.cooldown)
}
