package search

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"
)

// RateLimiter allows each tenant at most Limit requests in any Window, counted in Postgres
// (api_rate_limits) so that every API replica shares one count. It is a sliding log of the
// last Limit accepted requests: a request is accepted when the oldest of them is at least Window
// old. Refused requests are not counted. Times come from the injected clock of each replica.
type RateLimiter struct {
	pool   *pgxpool.Pool
	now    func() time.Time
	bucket string
	limit  int
	window time.Duration
}

// NewRateLimiter builds a limiter of limit requests per window for the named bucket (one count
// per tenant and bucket).
func NewRateLimiter(pool *pgxpool.Pool, now func() time.Time, bucket string, limit int, window time.Duration) (*RateLimiter, error) {
	if limit < 1 || limit > MaxRateLimit || window <= 0 || bucket == "" {
		return nil, fmt.Errorf("rate limiter %q: want a limit of 1 to %d per positive window, got %d per %s", bucket, MaxRateLimit, limit, window)
	}
	return &RateLimiter{pool: pool, now: now, bucket: bucket, limit: limit, window: window}, nil
}

// Take counts a request of the tenant, or returns an *errs.RateLimitedError saying how long to
// wait.
func (l *RateLimiter) Take(ctx context.Context, tenantID int64) error {
	var wait int64
	err := l.pool.QueryRow(ctx, `SELECT api_rate_take($1, $2, $3, $4, $5)`,
		tenantID, l.bucket, l.now().UnixMicro(), l.limit, l.window.Microseconds()).Scan(&wait)
	if err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	if wait <= 0 {
		return nil
	}
	return &errs.RateLimitedError{
		RetryAfter: time.Duration(wait) * time.Microsecond,
		Msg:        fmt.Sprintf("at most %d requests per %s per tenant", l.limit, l.window),
	}
}
