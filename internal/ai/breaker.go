package ai

import (
	"errors"
	"sync"
	"time"
)

// Defaults of the chat circuit breaker (Config.BreakerFailures, Config.BreakerCooldown).
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
)

// breaker is the chat model's circuit breaker, like the one search keeps around the embedding
// provider. Closed, it lets every call through and counts consecutive failures of the provider
// (unavailable: down, 5xx, no answer in time); at threshold it opens: calls are refused at once
// with ErrUnavailable for cooldown; then it lets one probe through (half-open): a success
// closes it, a failure opens it again.
type breaker struct {
	now       func() time.Time
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	failures int
	open     bool
	openedAt time.Time
	probing  bool
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
		b.openedAt, b.probing = b.now(), false
		return
	}
	b.failures++
	if b.failures >= b.threshold {
		b.open, b.openedAt, b.failures = true, b.now(), 0
	}
}

// abandon: the call ended without telling anything about the provider.
func (b *breaker) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// settle feeds the outcome of an allowed call to the breaker: ErrUnavailable is a failure of
// the provider; any other answer of the provider (a refusal included) shows it is up; anything
// else (the caller gave up, the stream's consumer stopped) tells nothing about it.
func (b *breaker) settle(err error) {
	var pe *ProviderError
	switch {
	case err == nil:
		b.success()
	case errors.Is(err, ErrUnavailable):
		b.failure()
	case errors.As(err, &pe):
		b.success()
	default:
		b.abandon()
	}
}
