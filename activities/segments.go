package activities

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/segment/draft"
)

// Error types of permanent segment failures (non-retryable application errors).
const (
	ErrTypeSegmentGone      = "SegmentNotFound"
	ErrTypeNoDefinition     = "SegmentNoDefinition"
	ErrTypeInvalidSegment   = "SegmentInvalid"
	ErrTypeNotDraftable     = "SegmentNotDraftable" // details: the code of segment.Draftable's error
	ErrTypeEmptySeed        = "LookalikeEmptySeed"
	ErrTypeInvalidLLMOutput = "InvalidLLMOutput"
)

// Segments are the segment activities.
type Segments struct {
	Svc    *segment.Service
	Runner segment.Runner // nil: the embedded Postgres warehouse
	Blob   blob.Store
	AI     ai.Provider
	// Connectors lists the active connectors of a segment (the activation fan-out); nil: none.
	Connectors ActiveConnectors
	// Metrics records computes (duration, members, outcome); nil: none.
	Metrics *metrics.Metrics
}

// ActiveConnectors is the part of the connector service the fan-out needs.
type ActiveConnectors interface {
	ActiveTargets(ctx context.Context, tenantID, segmentID int64) ([]connector.Target, error)
}

// BeginComputeInput starts a compute run.
type BeginComputeInput struct {
	TenantID   int64
	SegmentID  int64
	WorkflowID string
}

// BeginComputeResult identifies the run.
type BeginComputeResult struct {
	RunID   int64
	Version int
}

// BeginCompute records the run and marks the segment computing.
func (a *Segments) BeginCompute(ctx context.Context, in BeginComputeInput) (BeginComputeResult, error) {
	run, err := a.Svc.BeginRun(ctx, in.TenantID, in.SegmentID, in.WorkflowID)
	if err != nil {
		return BeginComputeResult{}, permanent(err)
	}
	return BeginComputeResult{RunID: run.ID, Version: run.Version}, nil
}

// MaterializeInput names the run.
type MaterializeInput struct {
	TenantID int64
	RunID    int64
}

// Materialize runs the segment's query and loads membership as a diff; it heartbeats while the
// warehouse works.
func (a *Segments) Materialize(ctx context.Context, in MaterializeInput) (segment.RunResult, error) {
	stop := heartbeat(ctx)
	defer stop()
	start := time.Now()
	res, err := a.Svc.Materialize(ctx, in.TenantID, in.RunID, a.Runner)
	a.Metrics.SegmentComputed(time.Since(start), res.Matched, err)
	if err != nil {
		return res, permanent(err)
	}
	return res, nil
}

// FailComputeInput records a failed run.
type FailComputeInput struct {
	TenantID  int64
	SegmentID int64
	RunID     int64 // 0 when the run never began
	Message   string
}

// FailCompute marks the run and the segment as failed with the message.
func (a *Segments) FailCompute(ctx context.Context, in FailComputeInput) error {
	if in.RunID == 0 {
		return permanent(a.Svc.MarkError(ctx, in.TenantID, in.SegmentID, in.Message))
	}
	return permanent(a.Svc.FailRun(ctx, in.TenantID, in.RunID, in.Message))
}

// ActivationTargetsInput asks which connectors sync after a run.
type ActivationTargetsInput struct {
	TenantID  int64
	SegmentID int64
	RunID     int64
}

// ActivationTargetsResult lists the active connectors of the segment. Connectors, parallel to
// ConnectorIDs, names them for the sync children's summaries; histories recorded before it have
// none (the summaries then show ids).
type ActivationTargetsResult struct {
	ConnectorIDs []int64
	Connectors   []connector.Target `json:",omitempty"`
}

// ActivationTargets is the activation fan-out: the active connectors of the segment, each of
// which gets a sync child workflow.
func (a *Segments) ActivationTargets(ctx context.Context, in ActivationTargetsInput) (ActivationTargetsResult, error) {
	if a.Connectors == nil {
		return ActivationTargetsResult{ConnectorIDs: []int64{}}, nil
	}
	targets, err := a.Connectors.ActiveTargets(ctx, in.TenantID, in.SegmentID)
	if err != nil {
		return ActivationTargetsResult{}, err
	}
	ids := make([]int64, len(targets))
	for i, t := range targets {
		ids[i] = t.ID
	}
	return ActivationTargetsResult{ConnectorIDs: ids, Connectors: targets}, nil
}

// ExportInput names an export.
type ExportInput struct {
	TenantID int64
	ExportID int64
}

// ExportResult is the finished export.
type ExportResult struct {
	RowCount int64
	Key      string
}

// WriteExport streams the members into the export file.
func (a *Segments) WriteExport(ctx context.Context, in ExportInput) (ExportResult, error) {
	stop := heartbeat(ctx)
	defer stop()
	e, err := a.Svc.WriteExport(ctx, in.TenantID, in.ExportID, a.Blob, nil)
	if err != nil {
		return ExportResult{}, permanent(err)
	}
	a.Metrics.SegmentExported(nil)
	var res ExportResult
	if e.RowCount != nil {
		res.RowCount = *e.RowCount
	}
	if e.BlobKey != nil {
		res.Key = *e.BlobKey
	}
	return res, nil
}

// FailExportInput records a failed export.
type FailExportInput struct {
	TenantID int64
	ExportID int64
	Message  string
}

// FailExport marks the export failed.
func (a *Segments) FailExport(ctx context.Context, in FailExportInput) error {
	if err := a.Svc.FailExport(ctx, in.TenantID, in.ExportID, in.Message); err != nil {
		return permanent(err)
	}
	a.Metrics.SegmentExported(errors.New(in.Message))
	return nil
}

// DraftInput asks the LLM for a definition.
type DraftInput struct {
	TenantID      int64
	SegmentID     int64
	PreviousError string // the validation error of the previous attempt, fed back to the model
}

// DraftResult is one attempt: a valid definition, or the reason it is not.
type DraftResult struct {
	Definition json.RawMessage
	Invalid    string
}

// DraftDefinition turns the segment's description into a definition through the AI provider and
// validates it with the compiler. Provider and database failures are retried by Temporal; invalid
// output (no JSON, or a definition the validator rejects) is returned as Invalid so the workflow
// can ask again with the error.
func (a *Segments) DraftDefinition(ctx context.Context, in DraftInput) (DraftResult, error) {
	seg, err := a.Svc.Get(ctx, in.TenantID, in.SegmentID)
	if err != nil {
		return DraftResult{}, permanent(err)
	}
	if err := seg.Draftable(); err != nil {
		// The code (not_ai_segment, no_description) travels as the error's details.
		var ce *errs.CodedError
		code := ""
		if errors.As(err, &ce) {
			code = ce.Code
		}
		return DraftResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNotDraftable, nil, code)
	}
	hints, err := a.Svc.Hints(ctx, in.TenantID)
	if err != nil {
		return DraftResult{}, permanent(err)
	}
	raw, err := draft.Draft(ai.WithSpend(ctx, in.TenantID, ai.OpSegmentDraft), a.AI, seg.Description, hints, in.PreviousError)
	switch {
	case errors.Is(err, draft.ErrNotUnderstood), errors.Is(err, draft.ErrNoJSON):
		return DraftResult{Invalid: err.Error()}, nil
	case errors.Is(err, ai.ErrInvalidRequest):
		return DraftResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidSegment, err)
	case err != nil:
		return DraftResult{}, err
	}
	canonical, err := a.Svc.ValidateDefinition(ctx, seg, raw)
	switch {
	case errors.Is(err, errs.ErrInvalid):
		return DraftResult{Invalid: err.Error()}, nil
	case err != nil:
		// Not the model's fault (the segment graph could not be read): retry, do not spend an attempt.
		return DraftResult{}, permanent(err)
	}
	return DraftResult{Definition: canonical}, nil
}

// SaveDraftInput stores a drafted definition.
type SaveDraftInput struct {
	TenantID   int64
	SegmentID  int64
	Definition json.RawMessage
}

// SaveDraft stores the definition as a new version with status draft.
func (a *Segments) SaveDraft(ctx context.Context, in SaveDraftInput) (*segment.Segment, error) {
	seg, err := a.Svc.SaveDraft(ctx, in.TenantID, in.SegmentID, in.Definition)
	if err != nil {
		return nil, permanent(err)
	}
	return seg, nil
}

// permanent turns errors retrying cannot fix into non-retryable application errors.
func permanent(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errs.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSegmentGone, err)
	case errors.Is(err, segment.ErrNoDefinition):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNoDefinition, err)
	case errors.Is(err, segment.ErrEmptySeed):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeEmptySeed, err)
	case errors.Is(err, errs.ErrInvalid):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidSegment, err)
	}
	return err
}

// TickerHeartbeatTimeout is the heartbeat timeout of the activities that heartbeat on a ticker
// (heartbeat: Materialize, WriteExport, PushSync, ComputeProductSegment): an attempt held by a
// killed worker is retried on another within it. They record a heartbeat every quarter of it, and
// the SDK sends one at least every 0.8 of the timeout, so a live worker never misses it.
const TickerHeartbeatTimeout = 20 * time.Second

// heartbeat records an activity heartbeat every TickerHeartbeatTimeout/4 until stop is called,
// so a worker crash is detected within the heartbeat timeout rather than the whole
// start-to-close timeout. stop waits for the heartbeat goroutine to end, so no heartbeat is
// recorded after the activity returns.
func heartbeat(ctx context.Context) (stop func()) {
	const every = TickerHeartbeatTimeout / 4
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
