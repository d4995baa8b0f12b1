package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
)

// Error types of activation sync failures.
const (
	ErrTypeConnectorGone       = "ConnectorNotFound"
	ErrTypeConnectorConfig     = "ConnectorConfigInvalid"
	ErrTypePlatformRejected    = "PlatformRejected"    // 400/401/403/404 ...: not retried
	ErrTypePlatformUnavailable = "PlatformUnavailable" // 429, 5xx, network: retried with backoff
)

// Activations are the activation sync activities. Workflow inputs and histories carry ids and
// counts only: the activity loads the connector and opens its secrets itself.
type Activations struct {
	Svc       *connector.Service
	Platforms *connector.Platforms
	// Metrics records pushes (duration, users pushed, outcome) by platform; nil: none.
	Metrics *metrics.Metrics
}

// BeginSyncInput starts a sync run.
type BeginSyncInput struct {
	TenantID     int64
	ConnectorID  int64
	SegmentRunID int64
	SyncRunID    int64
	Trigger      string
}

// BeginSyncResult is the claimed run, or SkipReason when the connector is gone or no longer
// active.
type BeginSyncResult struct {
	SyncRunID  int64
	SkipReason string
}

// BeginSync claims the run this workflow execution works on.
func (a *Activations) BeginSync(ctx context.Context, in BeginSyncInput) (BeginSyncResult, error) {
	info := activity.GetInfo(ctx)
	run, err := a.Svc.BeginSync(ctx, connector.BeginInput{
		TenantID: in.TenantID, ConnectorID: in.ConnectorID, SegmentRunID: in.SegmentRunID, SyncRunID: in.SyncRunID,
		Trigger: in.Trigger, WorkflowID: info.WorkflowExecution.ID, TemporalRunID: info.WorkflowExecution.RunID,
	})
	switch {
	case errors.Is(err, connector.ErrSkip):
		return BeginSyncResult{SkipReason: "the connector is not active"}, nil
	case errors.Is(err, errs.ErrNotFound):
		return BeginSyncResult{SkipReason: "the connector was deleted"}, nil
	case err != nil:
		return BeginSyncResult{}, err
	}
	return BeginSyncResult{SyncRunID: run.ID}, nil
}

// PushSyncInput names the run.
type PushSyncInput struct {
	TenantID  int64
	SyncRunID int64
}

// PushSyncResult is the run's totals.
type PushSyncResult struct {
	Added, Removed, Skipped, Failed int64
}

// PushSync pushes the connector's pending adds and removes to its platform. A retry resumes where
// the failed attempt stopped (what the platform acknowledged is recorded chunk by chunk).
func (a *Activations) PushSync(ctx context.Context, in PushSyncInput) (PushSyncResult, error) {
	stop := heartbeat(ctx)
	defer stop()
	run, err := a.Svc.Run(ctx, in.TenantID, in.SyncRunID)
	if err != nil {
		return PushSyncResult{}, syncError(err)
	}
	creds, err := a.Svc.Credentials(ctx, in.TenantID, run.ConnectorID)
	if err != nil {
		return PushSyncResult{}, syncError(err)
	}
	start := time.Now()
	p, err := a.Platforms.New(creds)
	if err != nil {
		a.Metrics.SyncPushed(creds.Kind, time.Since(start), 0, 0, err)
		return PushSyncResult{}, syncError(err)
	}
	c, err := a.Svc.Push(ctx, in.TenantID, in.SyncRunID, p, nil)
	// Counts are what the platform acknowledged, also of a push that failed part-way.
	a.Metrics.SyncPushed(creds.Kind, time.Since(start), c.Added, c.Removed, err)
	if err != nil {
		return PushSyncResult{}, syncError(err)
	}
	return PushSyncResult(c), nil
}

// FinishSyncInput records the end of a run; Error is empty on success.
type FinishSyncInput struct {
	TenantID  int64
	SyncRunID int64
	Error     string
}

// FinishSync records the run's outcome on the run and the connector.
func (a *Activations) FinishSync(ctx context.Context, in FinishSyncInput) error {
	err := a.Svc.FinishSync(ctx, in.TenantID, in.SyncRunID, in.Error)
	if errors.Is(err, errs.ErrNotFound) {
		return nil // the connector (and its runs) were deleted meanwhile
	}
	return err
}

// syncError classifies a sync failure for Temporal: platform 4xx and missing connectors are
// final; 429, 5xx and network errors are retried (after the platform's Retry-After when it gave
// one). Messages are the platform's own, already scrubbed of the connector's key.
func syncError(err error) error {
	var pe *platform.Error
	switch {
	case errors.As(err, &pe) && pe.Retryable:
		return temporal.NewApplicationErrorWithOptions(pe.Error(), ErrTypePlatformUnavailable, temporal.ApplicationErrorOptions{
			NextRetryDelay: pe.RetryAfter,
		})
	case errors.As(err, &pe):
		return temporal.NewNonRetryableApplicationError(pe.Error(), ErrTypePlatformRejected, nil)
	case errors.Is(err, errs.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConnectorGone, nil)
	case errors.Is(err, errs.ErrInvalid):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConnectorConfig, nil)
	}
	return err
}
