package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/feed"
)

// KindFeedSync is the feed sync workflow's kind.
const KindFeedSync = "feed-sync"

// SignalFeedSync asks a feed's sync workflow for a sync (see FeedSync).
const SignalFeedSync = "sync"

// FeedSyncID is a feed's sync workflow: "feed-sync:<tenant>:<feed>". One per feed, so two syncs of
// one feed never run at once.
func FeedSyncID(tenantID, feedID int64) string { return ID(KindFeedSync, tenantID, feedID) }

// FeedSyncInput names the feed.
type FeedSyncInput struct {
	TenantID int64
	FeedID   int64
}

// FeedSyncResult is what the execution's syncs did: the last one's counts, or its error.
type FeedSyncResult struct {
	Runs  int
	Gone  bool // the feed was deleted
	Last  activities.SyncFeedResult
	Error string
}

var feedActs *activities.Feeds

// Feed sync activity options: one long activity that heartbeats after every chunk it commits and
// starts the document again when retried. Its own fetch is capped by feed.Options.Timeout.
const (
	feedSyncTimeout      = feed.DefaultTimeout + 15*time.Minute
	feedSyncHeartbeat    = 5 * time.Minute
	feedSyncMaxAttempts  = 5
	feedSyncMaxRetryWait = time.Minute
	// feedSyncMaxRuns: after this many runs with requests pending the execution continues as new.
	feedSyncMaxRuns = 50
)

// FeedSync syncs a feed into the catalogue. Requests arrive as SignalFeedSync: the ones that
// started the execution are its first run; one delivered during a run asks for exactly one more
// run after it (several requests, one more run), so a sync never runs beside another sync of the
// feed and the catalogue is never older than the last request. A failed sync is recorded on the
// feed (FailFeedSync) and, when no request is pending, fails the workflow, so operators find it
// with `temporal workflow list --query 'WorkflowType="FeedSync" AND ExecutionStatus="Failed"'`.
func FeedSync(ctx workflow.Context, in FeedSyncInput) (FeedSyncResult, error) {
	var out FeedSyncResult
	reqs := newRequests(ctx, on(SignalFeedSync, func() bool { return true }))
	reqs.drop()
	syncCtx := workflow.WithActivityOptions(ctx, handBackSafe(workflow.ActivityOptions{
		StartToCloseTimeout: feedSyncTimeout,
		HeartbeatTimeout:    feedSyncHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        5 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        feedSyncMaxRetryWait,
			MaximumAttempts:        feedSyncMaxAttempts,
			NonRetryableErrorTypes: []string{activities.ErrTypeFeedSyncFailed, activities.ErrTypeFeedGone},
		},
	}))
	ref := activities.SyncFeedInput{TenantID: in.TenantID, FeedID: in.FeedID}
	for {
		reqs.rerun = false
		var res activities.SyncFeedResult
		err := reqs.await(workflow.ExecuteActivity(syncCtx, feedActs.SyncFeed, ref), &res)
		for n := 0; retryHandBack(ctx, err, &n); {
			err = reqs.await(workflow.ExecuteActivity(syncCtx, feedActs.SyncFeed, ref), &res)
		}
		out.Runs++
		if failureType(err) == activities.ErrTypeFeedGone {
			workflow.GetLogger(ctx).Info("feed gone; nothing to sync", "error", err)
			out.Gone, out.Error = true, ""
			return out, nil
		}
		out.Last, out.Error = res, ""
		if err != nil {
			out.Error = failureMessage("feed sync", err)
			if ferr := reqs.await(workflow.ExecuteActivity(shortActivity(ctx), feedActs.FailFeedSync, activities.FailFeedSyncInput{
				TenantID: in.TenantID, FeedID: in.FeedID, Reason: out.Error,
			}), nil); ferr != nil {
				workflow.GetLogger(ctx).Warn("recording the feed sync failure failed", "error", ferr)
			}
		}
		if !reqs.pending() {
			if err != nil {
				return out, temporal.NewNonRetryableApplicationError(out.Error, activities.ErrTypeFeedSyncFailed, nil)
			}
			return out, nil
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || out.Runs >= feedSyncMaxRuns {
			return out, workflow.NewContinueAsNewError(ctx, FeedSync, in)
		}
	}
}
