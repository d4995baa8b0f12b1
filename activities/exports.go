package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/pageexport"
)

// ErrTypePageExportGone: the export (or its page) was deleted; there is nothing to build.
const ErrTypePageExportGone = "PageExportNotFound"

// PageExportBuilder is the part of the export service (internal/pageexport) the activities use.
type PageExportBuilder interface {
	Build(ctx context.Context, tenantID, exportID int64) (*pageexport.Export, error)
	Fail(ctx context.Context, tenantID, exportID int64, msg string) error
}

// Exports are the page export activities.
type Exports struct {
	Svc PageExportBuilder
	// Metrics records every build (cohort_page_exports_*); nil records nothing.
	Metrics *metrics.Metrics
}

// PageExportRef names an export.
type PageExportRef struct {
	TenantID int64
	ExportID int64
}

// BuildPageExportResult is the stored file.
type BuildPageExportResult struct {
	Key       string
	SizeBytes int64
}

// BuildPageExport renders the export and stores its file (the export becomes ready). A deleted
// export or page is a permanent failure; anything else (database, blob store) is retried.
func (a *Exports) BuildPageExport(ctx context.Context, in PageExportRef) (BuildPageExportResult, error) {
	start := time.Now()
	e, err := a.Svc.Build(ctx, in.TenantID, in.ExportID)
	format := ""
	if e != nil {
		format = string(e.Format)
	}
	a.Metrics.ExportFinished(format, time.Since(start), err)
	if pageexport.IsGone(err) {
		return BuildPageExportResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePageExportGone, err)
	}
	if err != nil {
		return BuildPageExportResult{}, err
	}
	res := BuildPageExportResult{Key: e.BlobKey}
	if e.SizeBytes != nil {
		res.SizeBytes = *e.SizeBytes
	}
	return res, nil
}

// FailPageExportInput records a failed build.
type FailPageExportInput struct {
	TenantID int64
	ExportID int64
	Message  string
}

// FailPageExport marks the export failed.
func (a *Exports) FailPageExport(ctx context.Context, in FailPageExportInput) error {
	return a.Svc.Fail(ctx, in.TenantID, in.ExportID, in.Message)
}
