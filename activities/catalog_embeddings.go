package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
)

// ErrTypeWorkerStopping is the failure type of an activity handed back by a stopping worker
// (worker/stop.go): it is not the activity's failure, and another worker takes the work.
const ErrTypeWorkerStopping = "WorkerStopping"

// Error types of product embedding failures.
const (
	// ErrTypeNoEmbeddingProvider: the worker has no AI provider; not retried.
	ErrTypeNoEmbeddingProvider = "EmbeddingProviderMissing"
	// ErrTypeEmbeddingRateLimited: the provider said 429 with a Retry-After; retried after it.
	ErrTypeEmbeddingRateLimited = "EmbeddingRateLimited"
)

// ProductEmbeddings embeds a tenant's queued products (catalog.DrainEmbeddings).
type ProductEmbeddings struct {
	Catalog *catalog.Service
	AI      ai.Provider
}

// EmbedPendingInput names the tenant and the most queue rows to take (0: catalog.DefaultEmbedBatch).
type EmbedPendingInput struct {
	TenantID int64
	Limit    int
}

// EmbedPendingResult is what the drain did (see catalog.DrainResult).
type EmbedPendingResult struct {
	Read       int
	Embedded   int
	Unchanged  int
	Superseded int
	Failed     int
	Parked     int
	More       bool // ready queue rows are left
	// NextReadyIn: rows not ready now (leased by a drain that may have died, or backed off) are
	// ready in this long, when that is within catalog.EmbeddingLease; 0 otherwise.
	NextReadyIn time.Duration
}

// EmbedPending drains one batch of the tenant's embedding queue with one provider call, and
// heartbeats when it holds its rows and at each renewal of their lease
// (catalog.EmbeddingLeaseRenewEvery), so a drain whose worker died is retried within the
// heartbeat timeout; the rows it held are ready again within catalog.EmbeddingLease. Texts
// the provider refuses are no error: the domain counts an attempt on their rows and parks them
// after catalog.MaxEmbedAttempts. Every error is retried by Temporal: an unreachable or busy
// provider recovers, and a provider that refuses our credentials or model recovers once its
// configuration is fixed, after which the queued rows are embedded; a rate limit with a
// Retry-After is retried after that delay.
func (a *ProductEmbeddings) EmbedPending(ctx context.Context, in EmbedPendingInput) (EmbedPendingResult, error) {
	if a.AI == nil {
		return EmbedPendingResult{}, temporal.NewNonRetryableApplicationError("no ai provider is configured for product embeddings", ErrTypeNoEmbeddingProvider, nil)
	}
	alive := func() {}
	if activity.IsActivity(ctx) {
		alive = func() { activity.RecordHeartbeat(ctx) }
	}
	res, err := a.Catalog.DrainEmbeddingsAlive(ai.WithSpend(ctx, in.TenantID, ai.OpProductEmbed), in.TenantID, a.AI, in.Limit, alive)
	if err != nil {
		return EmbedPendingResult{}, embedError(err)
	}
	return EmbedPendingResult{Read: res.Read, Embedded: res.Embedded, Unchanged: res.Unchanged, Superseded: res.Superseded,
		Failed: res.Failed, Parked: res.Parked, More: res.More, NextReadyIn: res.NextReadyIn}, nil
}

// embedError is a drain's error as the activity returns it: retried, after the provider's
// Retry-After when it sent one.
func embedError(err error) error {
	var pe *ai.ProviderError
	if errors.As(err, &pe) && errors.Is(err, ai.ErrRateLimited) && pe.RetryAfter > 0 {
		return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeEmbeddingRateLimited,
			temporal.ApplicationErrorOptions{NextRetryDelay: pe.RetryAfter, Cause: err})
	}
	return err
}
