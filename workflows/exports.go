package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
)

// KindPageExport is the page export workflow.
const KindPageExport = "page-export"

// PageExportID is the workflow of one page export.
func PageExportID(tenantID, exportID int64) string { return ID(KindPageExport, tenantID, exportID) }

// PageExportInput names the export.
type PageExportInput struct {
	TenantID int64
	ExportID int64
}

var exportActs *activities.Exports

// PageExport builds a page export: one activity renders the file and stores it (the export goes
// building, then ready). A failure that outlasts the retries, or a permanent one, is recorded on
// the export (status error) and fails the workflow; an export deleted meanwhile (its page was)
// ends it quietly.
func PageExport(ctx workflow.Context, in PageExportInput) (activities.BuildPageExportResult, error) {
	var res activities.BuildPageExportResult
	build := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrTypePageExportGone}},
	})
	err := workflow.ExecuteActivity(build, exportActs.BuildPageExport, activities.PageExportRef{TenantID: in.TenantID, ExportID: in.ExportID}).Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	if failureType(err) == activities.ErrTypePageExportGone {
		workflow.GetLogger(ctx).Info("export gone; nothing to build", "error", err)
		return res, nil
	}
	msg := failureMessage("export", err)
	if ferr := workflow.ExecuteActivity(shortActivity(ctx), exportActs.FailPageExport, activities.FailPageExportInput{
		TenantID: in.TenantID, ExportID: in.ExportID, Message: msg,
	}).Get(ctx, nil); ferr != nil {
		workflow.GetLogger(ctx).Warn("recording the export failure failed", "error", ferr)
	}
	return res, temporal.NewNonRetryableApplicationError(msg, failureType(err), nil)
}
