package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ErrTypeImportFailed marks an import that cannot go on (a row longer than the limit, the file
// gone from the blob store, a mapped field removed from the schema): not retried.
const ErrTypeImportFailed = "ImportFailed"

// CatalogImports are the CSV import activities.
type CatalogImports struct {
	Svc *imports.Service
}

// RunImportInput names the confirmed job.
type RunImportInput struct {
	TenantID int64
	JobID    int64
}

// RunImportResult is the job's state when the activity ended.
type RunImportResult struct {
	Status        string
	ProcessedRows int64
	Created       int64
	Updated       int64
	Unchanged     int64
	SkippedRows   int64
	FailedRows    int64
}

// RunImport imports the job's file from its checkpoint to the end, heartbeating the rows done
// after every chunk. A retry resumes at the last committed chunk.
func (a *CatalogImports) RunImport(ctx context.Context, in RunImportInput) (RunImportResult, error) {
	err := a.Svc.Run(ctx, in.TenantID, in.JobID, func(p imports.Progress) {
		activity.RecordHeartbeat(ctx, p.ProcessedRows)
	})
	switch {
	case errors.Is(err, imports.ErrFailed):
		return RunImportResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeImportFailed, nil)
	case errors.Is(err, errs.ErrNotFound):
		return RunImportResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeImportFailed, nil)
	case err != nil:
		return RunImportResult{}, err
	}
	job, err := a.Svc.Get(ctx, in.TenantID, in.JobID)
	if err != nil {
		return RunImportResult{}, err
	}
	return RunImportResult{Status: job.Status, ProcessedRows: job.ProcessedRows, Created: job.Created, Updated: job.Updated,
		Unchanged: job.Unchanged, SkippedRows: job.SkippedRows, FailedRows: job.FailedRows}, nil
}

// FailImportInput names the job and why it failed.
type FailImportInput struct {
	TenantID int64
	JobID    int64
	Reason   string
}

// FailImport marks an importing job failed.
func (a *CatalogImports) FailImport(ctx context.Context, in FailImportInput) error {
	return a.Svc.Fail(ctx, in.TenantID, in.JobID, in.Reason)
}
