package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/connector"
)

// KindActivationSync is the workflow-ID kind of a connector sync:
// activation-sync:<tenant>:<connector>:<segment run> after a recompute, and
// activation-sync:<tenant>:<connector>:manual-<sync run> for POST /sync/.
const KindActivationSync = "activation-sync"

// ActivationSyncWorkflow is the name of the per-connector sync workflow.
const ActivationSyncWorkflow = "ActivationSync"

// Sync triggers (ActivationSyncInput.Trigger).
const (
	TriggerRecompute = connector.TriggerRecompute
	TriggerManual    = connector.TriggerManual
)

// ActivationSyncID is the sync workflow started by a segment run.
func ActivationSyncID(tenantID, connectorID, segmentRunID int64) string {
	return ID(KindActivationSync, tenantID, connectorID, segmentRunID)
}

// ManualSyncID is the sync workflow of a POST /sync/ (its run id).
func ManualSyncID(tenantID, connectorID, syncRunID int64) string {
	return ID(KindActivationSync, tenantID, connectorID, fmt.Sprintf("manual-%d", syncRunID))
}

// ConnectorSearchAttributes are the tenant, segment and connector search attributes, so
// `temporal workflow list --query 'CohortConnector=12'` finds a connector's syncs.
func ConnectorSearchAttributes(tenantID, segmentID, connectorID int64) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyInt64(SearchAttrTenant).ValueSet(tenantID),
		temporal.NewSearchAttributeKeyInt64(SearchAttrSegment).ValueSet(segmentID),
		temporal.NewSearchAttributeKeyInt64(SearchAttrConnector).ValueSet(connectorID),
	)
}

// ActivationSyncInput names the connector and what triggered the sync: ids only, never a
// secret (the activity loads and decrypts the connector's key itself).
type ActivationSyncInput struct {
	TenantID    int64
	SegmentID   int64
	ConnectorID int64
	RunID       int64  // the segment compute run (recompute trigger)
	SyncRunID   int64  // the queued sync run (manual trigger)
	Trigger     string // recompute or manual
}

// ActivationSyncResult is what the sync did.
type ActivationSyncResult struct {
	SyncRunID  int64
	SkipReason string `json:",omitempty"` // why the sync did not run (connector paused or deleted)
	activities.PushSyncResult
}

var act *activities.Activations

// ActivationSync pushes a connector's pending adds and removes to its platform and records the
// outcome: the run, and on the connector last_synced_at (success) or last_error and the error
// state (failure after retries). Platform 4xx answers fail at once; 429, 5xx and network
// errors are retried with backoff, resuming where the last attempt stopped. Reset a failed sync
// (temporal workflow reset --type FirstWorkflowTask) to replay it.
func ActivationSync(ctx workflow.Context, in ActivationSyncInput) (ActivationSyncResult, error) {
	var out ActivationSyncResult
	short := shortActivity(ctx)
	var begun activities.BeginSyncResult
	if err := workflow.ExecuteActivity(short, act.BeginSync, activities.BeginSyncInput{
		TenantID: in.TenantID, ConnectorID: in.ConnectorID, SegmentRunID: in.RunID, SyncRunID: in.SyncRunID, Trigger: in.Trigger,
	}).Get(ctx, &begun); err != nil {
		return out, err
	}
	out.SyncRunID, out.SkipReason = begun.SyncRunID, begun.SkipReason
	if begun.SkipReason != "" {
		return out, nil
	}
	push := workflow.WithActivityOptions(ctx, handBackSafe(workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    activities.TickerHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute, MaximumAttempts: 8,
		},
	}))
	pushIn := activities.PushSyncInput{TenantID: in.TenantID, SyncRunID: begun.SyncRunID}
	err := workflow.ExecuteActivity(push, act.PushSync, pushIn).Get(ctx, &out.PushSyncResult)
	for n := 0; retryHandBack(ctx, err, &n); {
		err = workflow.ExecuteActivity(push, act.PushSync, pushIn).Get(ctx, &out.PushSyncResult)
	}
	finish := activities.FinishSyncInput{TenantID: in.TenantID, SyncRunID: begun.SyncRunID}
	if err != nil {
		finish.Error = failureMessage("sync", err)
	}
	if ferr := workflow.ExecuteActivity(short, act.FinishSync, finish).Get(ctx, nil); ferr != nil {
		if err == nil {
			return out, ferr
		}
		workflow.GetLogger(ctx).Warn("recording the sync failure failed", "error", ferr)
	}
	return out, err
}
