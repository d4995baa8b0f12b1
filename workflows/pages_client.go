package workflows

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// PageJobs starts the page generation workflows from the API (client side). It is the page
// service's page.Generator.
type PageJobs struct {
	Client    client.Client
	TaskQueue string
	// Names finds the names of the workflows' summaries (summary.Store); nil: ids only.
	Names Namer
}

var _ page.Generator = (*PageJobs)(nil)

// StartGeneration starts the page's generation, or signals the one running (which joins the
// request or runs once more after it; see PageGenerate), so two never run at once.
func (j *PageJobs) StartGeneration(ctx context.Context, tenantID, pageID int64) error {
	id := PageGenerateID(tenantID, pageID)
	names := lookup(ctx, j.Names, tenantID, summary.Page, pageID)
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, SignalGenerate, nil, pageGenerateMeta(tenantID, pageID, names).startOptions(id, j.TaskQueue, TenantSearchAttributes(tenantID)), PageGenerate, PageGenerateInput{TenantID: tenantID, PageID: pageID})
	return unavailable("start page generation", err)
}

// StartBulk starts the bulk job's workflow (PageBulkGenerateID, so an operator finds it by
// tenant and job), or joins the one running. Starting a finished job's workflow again is
// harmless: it finds no pending page and leaves the job as it ended.
func (j *PageJobs) StartBulk(ctx context.Context, tenantID, jobID int64) error {
	id := PageBulkGenerateID(tenantID, jobID)
	names := lookup(ctx, j.Names, tenantID, summary.Tenant, tenantID)
	_, err := j.Client.ExecuteWorkflow(ctx, pageBulkMeta(tenantID, jobID, names).startOptions(id, j.TaskQueue, TenantSearchAttributes(tenantID)), PageBulkGenerate, PageBulkGenerateInput{TenantID: tenantID, JobID: jobID, TenantSlug: names.Tenant})
	return unavailable("start bulk page generation", err)
}
