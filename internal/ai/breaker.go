package ai

import (
	"errors"
	"time"

	"github.com/cohort-dev/cohort/internal/breaker"
)

// Defaults of the chat circuit breaker (Config.BreakerFailures, Config.BreakerCooldown).
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
)

// settle feeds the outcome of a call the chat breaker allowed: ErrUnavailable (down, 5xx, no
// answer in time) is a failure of the provider; any other answer of the provider (a refusal
// included) shows it is up; anything else (the caller gave up, the stream's consumer stopped)
// tells nothing about it.
func settle(b *breaker.Breaker, err error) {
	var pe *ProviderError
	switch {
	case err == nil:
		b.Success()
	case errors.Is(err, ErrUnavailable):
		b.Failure()
	case errors.As(err, &pe):
		b.Success()
	default:
		b.Abandon()
	}
}
