package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/feed"
	"github.com/cohort-dev/cohort/internal/metrics"
)

// Error types of the feed sync activity.
const (
	// ErrTypeFeedGone: the feed was deleted; the sync ends without recording anything.
	ErrTypeFeedGone = "FeedGone"
	// ErrTypeFeedSyncFailed: the document cannot be fetched or read in a way retrying cannot
	// change (a refused address, HTTP 404, malformed XML, over the size cap): not retried.
	ErrTypeFeedSyncFailed = "FeedSyncFailed"
	// ErrTypeFeedUnavailable: the feed's host could not be reached or answered 5xx; retried.
	ErrTypeFeedUnavailable = "FeedUnavailable"
)

// Feeds are the external product feed activities.
type Feeds struct {
	Svc *feed.Service
	// Metrics records every sync (cohort_feed_syncs_*); nil records nothing.
	Metrics *metrics.Metrics
}

// SyncFeedInput names the feed.
type SyncFeedInput struct {
	TenantID int64
	FeedID   int64
}

// SyncFeedResult is what the sync did.
type SyncFeedResult struct {
	Total     int
	Created   int
	Updated   int
	Unchanged int
	Failed    int
}

// SyncFeed fetches the feed's document and upserts its items, heartbeating the items read after
// every chunk. A retry starts the document again. Error messages are what the feed's last_error
// shows (feed.SyncError): they never carry an address the feed's host resolved to.
func (a *Feeds) SyncFeed(ctx context.Context, in SyncFeedInput) (SyncFeedResult, error) {
	start := time.Now()
	res, err := a.Svc.Sync(ctx, in.TenantID, in.FeedID, func(p feed.Progress) {
		activity.RecordHeartbeat(ctx, p.Items)
	})
	items := 0
	if res != nil {
		items = res.Total
	}
	a.Metrics.FeedSynced(items, time.Since(start), err)
	var se *feed.SyncError
	switch {
	case errors.Is(err, feed.ErrGone):
		return SyncFeedResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeFeedGone, nil)
	case errors.As(err, &se) && se.Permanent:
		return SyncFeedResult{}, temporal.NewNonRetryableApplicationError(se.Msg, ErrTypeFeedSyncFailed, nil)
	case errors.As(err, &se):
		return SyncFeedResult{}, temporal.NewApplicationError(se.Msg, ErrTypeFeedUnavailable)
	case err != nil:
		return SyncFeedResult{}, err
	}
	return SyncFeedResult{Total: res.Total, Created: res.Created, Updated: res.Updated, Unchanged: res.Unchanged, Failed: res.Failed}, nil
}

// FailFeedSyncInput names the feed and why its sync failed.
type FailFeedSyncInput struct {
	TenantID int64
	FeedID   int64
	Reason   string
}

// FailFeedSync records a failed sync on the feed (status error, last_error).
func (a *Feeds) FailFeedSync(ctx context.Context, in FailFeedSyncInput) error {
	return a.Svc.MarkFailed(ctx, in.TenantID, in.FeedID, in.Reason)
}
