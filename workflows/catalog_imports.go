package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
)

// KindCatalogImport is the CSV import workflow's kind.
const KindCatalogImport = "catalog-import"

// CatalogImportID is a job's import workflow: "catalog-import:<tenant>:<job>".
func CatalogImportID(tenantID, jobID int64) string { return ID(KindCatalogImport, tenantID, jobID) }

// CatalogImportInput names the confirmed job.
type CatalogImportInput struct {
	TenantID int64
	JobID    int64
}

var catalogImports *activities.CatalogImports

// Import activity options: one long activity that heartbeats after every chunk it commits (far
// more often than importHeartbeat) and resumes at its checkpoint when retried.
const (
	importRunTimeout   = 6 * time.Hour
	importHeartbeat    = 2 * time.Minute
	importMaxAttempts  = 20
	importMaxRetryWait = time.Minute
)

// CatalogImport imports a confirmed CSV job. The job ends done, or failed with the reason when
// the file cannot be imported or the retries run out; the workflow then fails too, so operators
// find it with `temporal workflow list --query 'WorkflowType="CatalogImport" AND ExecutionStatus="Failed"'`.
func CatalogImport(ctx workflow.Context, in CatalogImportInput) (activities.RunImportResult, error) {
	run := workflow.WithActivityOptions(ctx, handBackSafe(workflow.ActivityOptions{
		StartToCloseTimeout: importRunTimeout,
		HeartbeatTimeout:    importHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        2 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        importMaxRetryWait,
			MaximumAttempts:        importMaxAttempts,
			NonRetryableErrorTypes: []string{activities.ErrTypeImportFailed},
		},
	}))
	var res activities.RunImportResult
	runIn := activities.RunImportInput{TenantID: in.TenantID, JobID: in.JobID}
	err := workflow.ExecuteActivity(run, catalogImports.RunImport, runIn).Get(ctx, &res)
	for n := 0; retryHandBack(ctx, err, &n); {
		err = workflow.ExecuteActivity(run, catalogImports.RunImport, runIn).Get(ctx, &res)
	}
	if err == nil {
		return res, nil
	}
	reason := failureMessage("import", err)
	if ferr := workflow.ExecuteActivity(shortActivity(ctx), catalogImports.FailImport,
		activities.FailImportInput{TenantID: in.TenantID, JobID: in.JobID, Reason: reason}).Get(ctx, nil); ferr != nil {
		return res, ferr
	}
	return res, temporal.NewNonRetryableApplicationError(reason, activities.ErrTypeImportFailed, nil)
}
