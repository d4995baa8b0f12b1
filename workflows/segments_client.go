package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// SegmentJobs starts the segment workflows from the API (client side; no workflow code here).
type SegmentJobs struct {
	Client    client.Client
	TaskQueue string
	// Names finds the names of the workflows' summaries (summary.Store); nil: ids only.
	Names Namer
}

func (j *SegmentJobs) options(id string, tenantID, segmentID int64, md meta) client.StartWorkflowOptions {
	return md.startOptions(id, j.TaskQueue, SegmentSearchAttributes(tenantID, segmentID))
}

// computeStart is the input and the summary of a segment's compute.
func (j *SegmentJobs) computeStart(ctx context.Context, tenantID, segmentID int64) (SegmentComputeInput, meta) {
	names := lookup(ctx, j.Names, tenantID, summary.Segment, segmentID)
	in := SegmentComputeInput{TenantID: tenantID, SegmentID: segmentID, TenantSlug: names.Tenant, SegmentName: names.Name}
	return in, segmentComputeMeta(tenantID, segmentID, names)
}

// Compute starts the segment's compute, or joins the one running (see SegmentCompute). It
// returns the workflow id.
func (j *SegmentJobs) Compute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	id := SegmentComputeID(tenantID, segmentID)
	in, md := j.computeStart(ctx, tenantID, segmentID)
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, SignalCompute, nil, j.options(id, tenantID, segmentID, md), SegmentCompute, in)
	if err != nil {
		return id, unavailable("start segment compute", err)
	}
	return id, nil
}

// Recompute makes sure a compute with the newest definition runs: it starts one, or signals the
// running one to run again when it ends.
func (j *SegmentJobs) Recompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	id := SegmentComputeID(tenantID, segmentID)
	in, md := j.computeStart(ctx, tenantID, segmentID)
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, SignalRecompute, nil, j.options(id, tenantID, segmentID, md), SegmentCompute, in)
	if err != nil {
		return id, unavailable("start segment recompute", err)
	}
	return id, nil
}

// Export starts the export workflow.
func (j *SegmentJobs) Export(ctx context.Context, tenantID, segmentID, exportID int64) error {
	id := SegmentExportID(tenantID, exportID)
	md := segmentExportMeta(tenantID, segmentID, exportID, lookup(ctx, j.Names, tenantID, summary.SegmentExport, exportID))
	_, err := j.Client.ExecuteWorkflow(ctx, j.options(id, tenantID, segmentID, md), SegmentExport, SegmentExportInput{TenantID: tenantID, ExportID: exportID})
	return unavailable("start segment export", err)
}

// DraftTimeout bounds how long POST /draft/ waits for the AI provider.
const DraftTimeout = 90 * time.Second

// Draft runs the drafting workflow and waits for it.
func (j *SegmentJobs) Draft(ctx context.Context, tenantID, segmentID int64) (*segment.Segment, error) {
	ctx, cancel := context.WithTimeout(ctx, DraftTimeout)
	defer cancel()
	id := SegmentDraftID(tenantID, segmentID)
	md := segmentDraftMeta(tenantID, segmentID, lookup(ctx, j.Names, tenantID, summary.Segment, segmentID))
	run, err := j.Client.ExecuteWorkflow(ctx, j.options(id, tenantID, segmentID, md), SegmentDraft, SegmentDraftInput{TenantID: tenantID, SegmentID: segmentID})
	if err != nil {
		return nil, unavailable("start segment draft", err)
	}
	var out segment.Segment
	if err := run.Get(ctx, &out); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			switch app.Type() {
			case activities.ErrTypeInvalidLLMOutput:
				return nil, errs.Coded(errs.ErrUnavailable, "ai_output_invalid", "%s", app.Message())
			case activities.ErrTypeSegmentGone:
				return nil, errs.Coded(errs.ErrNotFound, "not_found", "%s", app.Message())
			case activities.ErrTypeNotDraftable:
				// The segment's own state (segment.Draftable): its code tells which.
				code := "not_draftable"
				if app.HasDetails() {
					_ = app.Details(&code)
				}
				return nil, errs.Coded(errs.ErrInvalid, code, "%s", app.Message())
			case activities.ErrTypeInvalidSegment:
				return nil, errs.Coded(errs.ErrInvalid, "not_draftable", "%s", app.Message())
			}
		}
		if ctx.Err() != nil {
			return nil, errs.Coded(errs.ErrUnavailable, "ai_timeout", "the AI provider did not answer within %s; the draft continues in workflow %s", DraftTimeout, id)
		}
		return nil, errs.Coded(errs.ErrUnavailable, "ai_unavailable", "drafting failed: %s", err.Error())
	}
	return &out, nil
}

// SetRefresh makes the segment's refresh schedule run every interval: the schedule is updated in
// place (its next runs and history kept), or created when there is none; every 0 deletes it
// (no schedule is no error). Scheduled runs get workflow ids "segment-compute:<tenant>:<segment>-<time>"
// and skip a tick while one still runs; computes of a segment never overlap in the database
// either (an advisory lock).
func (j *SegmentJobs) SetRefresh(ctx context.Context, tenantID, segmentID int64, every time.Duration) error {
	sc := j.Client.ScheduleClient()
	id := ID(KindSegmentRefresh, tenantID, segmentID)
	h := sc.GetHandle(ctx, id)
	if every <= 0 {
		if err := h.Delete(ctx); err != nil && !isNotFound(err) {
			return unavailable("delete refresh schedule", err)
		}
		return nil
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	in, md := j.computeStart(ctx, tenantID, segmentID)
	action := &client.ScheduleWorkflowAction{
		ID:                    SegmentComputeID(tenantID, segmentID),
		Workflow:              SegmentCompute,
		Args:                  []any{in},
		TaskQueue:             j.TaskQueue,
		TypedSearchAttributes: SegmentSearchAttributes(tenantID, segmentID),
		StaticSummary:         md.Summary,
		StaticDetails:         md.Details,
	}
	err := h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		sched := in.Description.Schedule
		sched.Spec = &spec
		sched.Action = action
		if sched.Policy == nil {
			sched.Policy = &client.SchedulePolicies{}
		}
		sched.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
		return &client.ScheduleUpdate{Schedule: &sched}, nil
	}})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return unavailable("update refresh schedule", err)
	}
	_, err = sc.Create(ctx, client.ScheduleOptions{
		ID:                    id,
		Spec:                  spec,
		Overlap:               enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action:                action,
		TypedSearchAttributes: SegmentSearchAttributes(tenantID, segmentID),
	})
	return unavailable("create refresh schedule", err)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func unavailable(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w: %w", what, errs.ErrUnavailable, err)
}
