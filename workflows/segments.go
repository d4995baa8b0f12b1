package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/segment"
)

// Workflow-ID kinds and signals of segments.
const (
	KindSegmentCompute = "segment-compute"
	KindSegmentRefresh = "segment-refresh" // the Temporal Schedule of refresh_every
	KindSegmentExport  = "segment-export"
	KindSegmentDraft   = "segment-draft"

	// SignalCompute asks for a compute (POST /compute/); SignalRecompute says the definition
	// changed (PATCH). See SegmentCompute.
	SignalCompute   = "compute"
	SignalRecompute = "recompute"
)

// SegmentComputeID is the compute workflow of a segment: one at a time; a second request joins.
func SegmentComputeID(tenantID, segmentID int64) string {
	return ID(KindSegmentCompute, tenantID, segmentID)
}

// SegmentSearchAttributes are the tenant and segment search attributes.
func SegmentSearchAttributes(tenantID, segmentID int64) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyInt64(SearchAttrTenant).ValueSet(tenantID),
		temporal.NewSearchAttributeKeyInt64(SearchAttrSegment).ValueSet(segmentID),
	)
}

// SegmentComputeInput names the segment.
type SegmentComputeInput struct {
	TenantID  int64
	SegmentID int64
	// TenantSlug and SegmentName are for the summaries of the sync children only (the names
	// when the execution was started; "" in executions started before they existed).
	TenantSlug  string `json:",omitempty"`
	SegmentName string `json:",omitempty"`
}

// SegmentComputeResult is the last run's outcome (of this execution: one that continued as new
// returns no result).
type SegmentComputeResult struct {
	Runs int
	Last segment.RunResult
}

var seg *activities.Segments

// shortActivity is the options of the bookkeeping activities (database updates, lookups):
// seconds each, retried for a few minutes.
func shortActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 10},
	})
}

// Versions of SegmentCompute's command sequence (workflow.GetVersion).
const (
	segmentComputeVersionID = "segment-compute"
	// segmentComputeContinues: the execution continues as new when the server suggests it or
	// after segmentComputeMaxRuns runs, and one whose segment is gone ends without recording a
	// failure (a leftover refresh schedule may start it).
	segmentComputeContinues = 1
)

// segmentComputeMaxRuns bounds the runs of one execution, whatever the server suggests, so a
// segment computed back to back keeps a bounded history.
const segmentComputeMaxRuns = 100

// SegmentCompute runs a segment's query, loads membership as a diff, updates the segment, bumps
// the membership cache and fans out to the segment's active activation connectors.
//
// Requests arrive as signals (SignalWithStart, so the first one starts the workflow):
// SignalCompute joins a run that has not finished loading membership yet and asks for one more
// run once it has (the caller wants data at least as new as the request); SignalRecompute (the
// definition changed) asks for one more run unless the current one has not read the definition
// yet. So concurrent requests never run the query twice for nothing, and the segment never stays
// "queued" after the workflow ends.
//
// Runs requested back to back would grow one history without bound: after a run with more
// requests pending, the execution continues as new when the server suggests it (or after
// segmentComputeMaxRuns runs), having taken every request delivered so far; the new execution
// starts with the run they asked for.
func SegmentCompute(ctx workflow.Context, in SegmentComputeInput) (SegmentComputeResult, error) {
	var out SegmentComputeResult
	version := workflow.GetVersion(ctx, segmentComputeVersionID, workflow.DefaultVersion, segmentComputeContinues)
	const (
		phaseStarting  = iota // BeginCompute has not read the version yet
		phaseComputing        // the query and the load run
		phaseLoaded           // membership is loaded
	)
	phase := phaseStarting
	// A compute request asks for one more run once membership is loaded; a recompute (the
	// definition changed) once the run has read the definition. A request delivered before an
	// awaited activity completes counts in the current phase, one delivered with or after it in
	// the next one.
	reqs := newRequests(ctx,
		on(SignalCompute, func() bool { return phase == phaseLoaded }),
		on(SignalRecompute, func() bool { return phase != phaseStarting }))
	short := shortActivity(ctx)
	long := workflow.WithActivityOptions(ctx, handBackSafe(workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    activities.TickerHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	}))
	workflowID := workflow.GetInfo(ctx).WorkflowExecution.ID
	for {
		phase, reqs.rerun = phaseStarting, false
		var begun activities.BeginComputeResult
		err := reqs.await(workflow.ExecuteActivity(short, seg.BeginCompute, activities.BeginComputeInput{
			TenantID: in.TenantID, SegmentID: in.SegmentID, WorkflowID: workflowID,
		}), &begun)
		if err == nil {
			phase = phaseComputing
			materialize := activities.MaterializeInput{TenantID: in.TenantID, RunID: begun.RunID}
			err = reqs.await(workflow.ExecuteActivity(long, seg.Materialize, materialize), &out.Last)
			for n := 0; retryHandBack(ctx, err, &n); {
				err = reqs.await(workflow.ExecuteActivity(long, seg.Materialize, materialize), &out.Last)
			}
		}
		phase = phaseLoaded
		if err != nil && version >= segmentComputeContinues && begun.RunID == 0 && isSegmentGone(err) {
			// Deleted: nothing to compute or to record. Requests for it go with it.
			workflow.GetLogger(ctx).Info("segment gone; nothing to compute", "error", err)
			return out, nil
		}
		if err != nil {
			if ferr := workflow.ExecuteActivity(short, seg.FailCompute, activities.FailComputeInput{
				TenantID: in.TenantID, SegmentID: in.SegmentID, RunID: begun.RunID, Message: failureMessage("compute", err),
			}).Get(ctx, nil); ferr != nil {
				workflow.GetLogger(ctx).Warn("recording the compute failure failed", "error", ferr)
			}
			if !reqs.pending() {
				return out, err
			}
			if continueAsNew(ctx, version, out.Runs+1) {
				return out, workflow.NewContinueAsNewError(ctx, SegmentCompute, in)
			}
			continue
		}
		out.Runs++
		// The definition changed after BeginCompute read it (a PATCH racing the start): the
		// membership is of an older version, so run again whatever the signals said.
		reqs.rerun = reqs.rerun || out.Last.LatestVersion > out.Last.Version
		if err := fanOut(ctx, short, in, out.Last.RunID); err != nil {
			workflow.GetLogger(ctx).Warn("activation fan-out failed", "error", err)
		}
		if !reqs.pending() {
			return out, nil
		}
		if continueAsNew(ctx, version, out.Runs) {
			return out, workflow.NewContinueAsNewError(ctx, SegmentCompute, in)
		}
	}
}

// continueAsNew says whether an execution that has made runs runs (and has requests pending,
// all taken) continues as new instead of running again.
func continueAsNew(ctx workflow.Context, version workflow.Version, runs int) bool {
	return version >= segmentComputeContinues &&
		(workflow.GetInfo(ctx).GetContinueAsNewSuggested() || runs >= segmentComputeMaxRuns)
}

// isSegmentGone reports an activity failure saying the segment no longer exists.
func isSegmentGone(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTypeSegmentGone
}

// fanOut starts one sync child workflow per active connector of the segment, abandoned so a
// slow platform never holds the next compute; each is visible and replayable in the Temporal UI.
func fanOut(ctx, short workflow.Context, in SegmentComputeInput, runID int64) error {
	var targets activities.ActivationTargetsResult
	if err := workflow.ExecuteActivity(short, seg.ActivationTargets, activities.ActivationTargetsInput{
		TenantID: in.TenantID, SegmentID: in.SegmentID, RunID: runID,
	}).Get(ctx, &targets); err != nil {
		return err
	}
	var errs []error
	for i, id := range targets.ConnectorIDs {
		var target connector.Target
		if i < len(targets.Connectors) && targets.Connectors[i].ID == id {
			target = targets.Connectors[i]
		}
		md := recomputeSyncMeta(in, id, target, runID)
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            ActivationSyncID(in.TenantID, id, runID),
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			TypedSearchAttributes: ConnectorSearchAttributes(in.TenantID, in.SegmentID, id),
			StaticSummary:         md.Summary,
			StaticDetails:         md.Details,
		})
		f := workflow.ExecuteChildWorkflow(cctx, ActivationSyncWorkflow, ActivationSyncInput{
			TenantID: in.TenantID, SegmentID: in.SegmentID, ConnectorID: id, RunID: runID, Trigger: TriggerRecompute,
		})
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			errs = append(errs, fmt.Errorf("start sync of connector %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// failureMessage is the error text users see in last_error / the export's error: the
// application error's message without Temporal's wrapping. what names the job ("compute").
func failureMessage(what string, err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "the " + what + " timed out: " + timeout.Error()
	}
	return err.Error()
}

// SegmentExportID is the export workflow's ID.
func SegmentExportID(tenantID, exportID int64) string {
	return ID(KindSegmentExport, tenantID, exportID)
}

// SegmentExportInput names the export.
type SegmentExportInput struct {
	TenantID int64
	ExportID int64
}

// SegmentExport writes a segment's members to a file in the blob store.
func SegmentExport(ctx workflow.Context, in SegmentExportInput) (activities.ExportResult, error) {
	var res activities.ExportResult
	long := workflow.WithActivityOptions(ctx, handBackSafe(workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    activities.TickerHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
	}))
	export := activities.ExportInput{TenantID: in.TenantID, ExportID: in.ExportID}
	err := workflow.ExecuteActivity(long, seg.WriteExport, export).Get(ctx, &res)
	for n := 0; retryHandBack(ctx, err, &n); {
		err = workflow.ExecuteActivity(long, seg.WriteExport, export).Get(ctx, &res)
	}
	if err != nil {
		if ferr := workflow.ExecuteActivity(shortActivity(ctx), seg.FailExport, activities.FailExportInput{
			TenantID: in.TenantID, ExportID: in.ExportID, Message: failureMessage("export", err),
		}).Get(ctx, nil); ferr != nil {
			workflow.GetLogger(ctx).Warn("recording the export failure failed", "error", ferr)
		}
		return res, err
	}
	return res, nil
}

// SegmentDraftID is the drafting workflow's ID.
func SegmentDraftID(tenantID, segmentID int64) string {
	return ID(KindSegmentDraft, tenantID, segmentID)
}

// SegmentDraftInput names the ai segment.
type SegmentDraftInput struct {
	TenantID  int64
	SegmentID int64
}

// DraftAttempts is how many times the LLM is asked before invalid output is reported.
const DraftAttempts = 3

// SegmentDraft asks the AI provider for a definition of the segment's description, feeding each
// validation error back, and saves the first valid one as a new draft version. Invalid output is
// never saved.
func SegmentDraft(ctx workflow.Context, in SegmentDraftInput) (*segment.Segment, error) {
	llm := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumAttempts: 4},
	})
	short := shortActivity(ctx)
	prev := ""
	for attempt := 1; attempt <= DraftAttempts; attempt++ {
		var res activities.DraftResult
		if err := workflow.ExecuteActivity(llm, seg.DraftDefinition, activities.DraftInput{
			TenantID: in.TenantID, SegmentID: in.SegmentID, PreviousError: prev,
		}).Get(ctx, &res); err != nil {
			return nil, err
		}
		if res.Invalid == "" {
			var out segment.Segment
			if err := workflow.ExecuteActivity(short, seg.SaveDraft, activities.SaveDraftInput{
				TenantID: in.TenantID, SegmentID: in.SegmentID, Definition: res.Definition,
			}).Get(ctx, &out); err != nil {
				return nil, err
			}
			return &out, nil
		}
		prev = res.Invalid
	}
	return nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the AI provider gave no valid definition in %d attempts; last problem: %s", DraftAttempts, prev),
		activities.ErrTypeInvalidLLMOutput, nil)
}
