package workflows

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/page"
)

// PageJobs starts the page generation workflows from the API (client side). It is the page
// service's page.Generator.
type PageJobs struct {
	Client    client.Client
	TaskQueue string
}

var _ page.Generator = (*PageJobs)(nil)

// StartGeneration starts the page's generation, or signals the one running (which joins the
// request or runs once more after it; see PageGenerate), so two never run at once.
func (j *PageJobs) StartGeneration(ctx context.Context, tenantID, pageID int64) error {
	id := PageGenerateID(tenantID, pageID)
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, SignalGenerate, nil, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                j.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    TenantSearchAttributes(tenantID),
	}, PageGenerate, PageGenerateInput{TenantID: tenantID, PageID: pageID})
	return unavailable("start page generation", err)
}

// StartBulk starts the bulk job's workflow (PageBulkGenerateID, so an operator finds it by
// tenant and job), or joins the one running. Starting a finished job's workflow again is
// harmless: it finds no pending page and leaves the job as it ended.
func (j *PageJobs) StartBulk(ctx context.Context, tenantID, jobID int64) error {
	id := PageBulkGenerateID(tenantID, jobID)
	_, err := j.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                j.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    TenantSearchAttributes(tenantID),
	}, PageBulkGenerate, PageBulkGenerateInput{TenantID: tenantID, JobID: jobID})
	return unavailable("start bulk page generation", err)
}
