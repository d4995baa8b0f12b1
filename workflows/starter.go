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
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/feed"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// Starter starts Cohort's workflows from the API and the services (client side; no workflow code
// here). cmd/cohort builds one per process and hands it to every service, each of which declares
// the small interface of the starts it makes (page.Generator, segment.Starter,
// prodseg.ComputeStarter, imports.Starter, catalog.EmbeddingScheduler, connector.SyncStarter,
// feed.SyncStarter, pageexport.Starter).
type Starter struct {
	Client    client.Client
	TaskQueue string
	// Names finds the names of the workflows' summaries (summary.Store); nil: ids only.
	Names Namer
}

var (
	_ page.Generator             = (*Starter)(nil)
	_ segment.Starter            = (*Starter)(nil)
	_ catalog.EmbeddingScheduler = (*Starter)(nil)
	_ connector.SyncStarter      = (*Starter)(nil)
	_ feed.SyncStarter           = (*Starter)(nil)
	_ pageexport.Starter         = (*Starter)(nil)
	_ imports.Starter            = (*Starter)(nil)
	_ prodseg.ComputeStarter     = (*Starter)(nil)
)

// start starts wf(in) under id with md's summary and the start options every API start shares
// (meta.startOptions: an open run of the id is joined, a closed one does not stop a new start).
// what names the start in the error (ErrUnavailable: Temporal could not be reached).
func (j *Starter) start(ctx context.Context, what, id string, md meta, attrs temporal.SearchAttributes, wf, in any) error {
	_, err := j.Client.ExecuteWorkflow(ctx, md.startOptions(id, j.TaskQueue, attrs), wf, in)
	return unavailable(what, err)
}

// signalStart sends signal to the workflow id, starting wf(in) first when none runs (as start).
func (j *Starter) signalStart(ctx context.Context, what, id, signal string, md meta, attrs temporal.SearchAttributes, wf, in any) error {
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, signal, nil, md.startOptions(id, j.TaskQueue, attrs), wf, in)
	return unavailable(what, err)
}

// StartGeneration starts the page's generation, or signals the one running (which joins the
// request or runs once more after it; see PageGenerate), so two never run at once.
func (j *Starter) StartGeneration(ctx context.Context, tenantID, pageID int64) error {
	id := PageGenerateID(tenantID, pageID)
	md := pageGenerateMeta(tenantID, pageID, lookup(ctx, j.Names, tenantID, summary.Page, pageID))
	return j.signalStart(ctx, "start page generation", id, SignalGenerate, md, TenantSearchAttributes(tenantID),
		PageGenerate, PageGenerateInput{TenantID: tenantID, PageID: pageID})
}

// StartBulk starts the bulk job's workflow (PageBulkGenerateID, so an operator finds it by
// tenant and job), or joins the one running. Starting a finished job's workflow again is
// harmless: it finds no pending page and leaves the job as it ended.
func (j *Starter) StartBulk(ctx context.Context, tenantID, jobID int64) error {
	names := lookup(ctx, j.Names, tenantID, summary.Tenant, tenantID)
	return j.start(ctx, "start bulk page generation", PageBulkGenerateID(tenantID, jobID), pageBulkMeta(tenantID, jobID, names),
		TenantSearchAttributes(tenantID), PageBulkGenerate, PageBulkGenerateInput{TenantID: tenantID, JobID: jobID, TenantSlug: names.Tenant})
}

// StartExport starts the build of a recorded page export. A run of the same id that is still
// open is joined; a closed one (the export ids of a database restored from a backup, or
// recreated, start again while Temporal keeps its history) does not stop a new build: with the
// default WorkflowExecutionErrorWhenAlreadyStarted the SDK would otherwise hand back the old,
// closed run and the export would stay queued.
func (j *Starter) StartExport(ctx context.Context, tenantID, exportID int64) error {
	md := pageExportMeta(tenantID, exportID, lookup(ctx, j.Names, tenantID, summary.PageExport, exportID))
	return j.start(ctx, "start page export", PageExportID(tenantID, exportID), md, TenantSearchAttributes(tenantID),
		PageExport, PageExportInput{TenantID: tenantID, ExportID: exportID})
}

// StartFeedSync starts the feed's sync, or signals the one running (which runs once more after
// the current run; see FeedSync).
func (j *Starter) StartFeedSync(ctx context.Context, tenantID, feedID int64) error {
	md := feedSyncMeta(tenantID, feedID, lookup(ctx, j.Names, tenantID, summary.Feed, feedID))
	return j.signalStart(ctx, "start feed sync", FeedSyncID(tenantID, feedID), SignalFeedSync, md, TenantSearchAttributes(tenantID),
		FeedSync, FeedSyncInput{TenantID: tenantID, FeedID: feedID})
}

// SyncWorkflowID names the workflow of a manual sync run (ManualSyncID).
func (j *Starter) SyncWorkflowID(tenantID, connectorID, syncRunID int64) string {
	return ManualSyncID(tenantID, connectorID, syncRunID)
}

// StartSync starts the workflow of a queued manual sync run of an activation connector.
func (j *Starter) StartSync(ctx context.Context, tenantID, segmentID, connectorID, syncRunID int64) error {
	md := manualSyncMeta(tenantID, segmentID, connectorID, syncRunID, lookup(ctx, j.Names, tenantID, summary.Connector, connectorID))
	return j.start(ctx, fmt.Sprintf("start sync of connector %d", connectorID), ManualSyncID(tenantID, connectorID, syncRunID), md,
		ConnectorSearchAttributes(tenantID, segmentID, connectorID), ActivationSyncWorkflow, ActivationSyncInput{
			TenantID: tenantID, SegmentID: segmentID, ConnectorID: connectorID, SyncRunID: syncRunID, Trigger: TriggerManual,
		})
}

// StartImport starts the job's import, or finds the one already running; it returns the id. A
// closed run of the same id (job ids start again when the database is restored or recreated
// while Temporal keeps its history) does not stop a new import: with the default
// WorkflowExecutionErrorWhenAlreadyStarted the SDK would hand back the old run and the job would
// stay importing. Re-running a finished import is harmless: it upserts by SKU.
func (j *Starter) StartImport(ctx context.Context, tenantID, jobID int64) (string, error) {
	id := CatalogImportID(tenantID, jobID)
	md := catalogImportMeta(tenantID, jobID, lookup(ctx, j.Names, tenantID, summary.ImportJob, jobID))
	return id, j.start(ctx, "start catalog import", id, md, TenantSearchAttributes(tenantID),
		CatalogImport, CatalogImportInput{TenantID: tenantID, JobID: jobID})
}

// ScheduleEmbeddings signals the tenant's ProductEmbeddings workflow, starting it when none runs.
func (j *Starter) ScheduleEmbeddings(ctx context.Context, tenantID int64) error {
	md := productEmbeddingsMeta(tenantID, lookup(ctx, j.Names, tenantID, summary.Tenant, tenantID))
	return j.signalStart(ctx, "schedule product embeddings", ProductEmbeddingsID(tenantID), SignalEmbed, md, TenantSearchAttributes(tenantID),
		ProductEmbeddings, ProductEmbeddingsInput{TenantID: tenantID, Limit: EmbedBatch})
}

// StartCompute starts the product segment's compute, or signals the one running (which joins
// the request or runs once more), and returns the workflow id: prodseg.ComputeStarter.
func (j *Starter) StartCompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	id := ProductSegmentComputeID(tenantID, segmentID)
	md := productSegmentMeta(tenantID, segmentID, lookup(ctx, j.Names, tenantID, summary.ProductSegment, segmentID))
	return id, j.signalStart(ctx, "start product segment compute", id, SignalCompute, md, TenantSearchAttributes(tenantID),
		ProductSegmentCompute, ProductSegmentComputeInput{TenantID: tenantID, SegmentID: segmentID})
}

// computeStart is the input and the summary of a segment's compute.
func (j *Starter) computeStart(ctx context.Context, tenantID, segmentID int64) (SegmentComputeInput, meta) {
	names := lookup(ctx, j.Names, tenantID, summary.Segment, segmentID)
	in := SegmentComputeInput{TenantID: tenantID, SegmentID: segmentID, TenantSlug: names.Tenant, SegmentName: names.Name}
	return in, segmentComputeMeta(tenantID, segmentID, names)
}

// Compute starts the segment's compute, or joins the one running (see SegmentCompute). It
// returns the workflow id.
func (j *Starter) Compute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	id := SegmentComputeID(tenantID, segmentID)
	in, md := j.computeStart(ctx, tenantID, segmentID)
	return id, j.signalStart(ctx, "start segment compute", id, SignalCompute, md, SegmentSearchAttributes(tenantID, segmentID), SegmentCompute, in)
}

// Recompute makes sure a compute with the newest definition runs: it starts one, or signals the
// running one to run again when it ends.
func (j *Starter) Recompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	id := SegmentComputeID(tenantID, segmentID)
	in, md := j.computeStart(ctx, tenantID, segmentID)
	return id, j.signalStart(ctx, "start segment recompute", id, SignalRecompute, md, SegmentSearchAttributes(tenantID, segmentID), SegmentCompute, in)
}

// Export starts the segment export workflow.
func (j *Starter) Export(ctx context.Context, tenantID, segmentID, exportID int64) error {
	md := segmentExportMeta(tenantID, segmentID, exportID, lookup(ctx, j.Names, tenantID, summary.SegmentExport, exportID))
	return j.start(ctx, "start segment export", SegmentExportID(tenantID, exportID), md, SegmentSearchAttributes(tenantID, segmentID),
		SegmentExport, SegmentExportInput{TenantID: tenantID, ExportID: exportID})
}

// DraftTimeout bounds how long POST /draft/ waits for the AI provider.
const DraftTimeout = 90 * time.Second

// Draft runs the drafting workflow and waits for it.
func (j *Starter) Draft(ctx context.Context, tenantID, segmentID int64) (*segment.Segment, error) {
	ctx, cancel := context.WithTimeout(ctx, DraftTimeout)
	defer cancel()
	id := SegmentDraftID(tenantID, segmentID)
	md := segmentDraftMeta(tenantID, segmentID, lookup(ctx, j.Names, tenantID, summary.Segment, segmentID))
	run, err := j.Client.ExecuteWorkflow(ctx, md.startOptions(id, j.TaskQueue, SegmentSearchAttributes(tenantID, segmentID)), SegmentDraft, SegmentDraftInput{TenantID: tenantID, SegmentID: segmentID})
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
func (j *Starter) SetRefresh(ctx context.Context, tenantID, segmentID int64, every time.Duration) error {
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
