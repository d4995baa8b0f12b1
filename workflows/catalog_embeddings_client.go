package workflows

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// ProductEmbeddingJobs starts or wakes the tenants' embedding workflows (client side). It is the
// catalogue's catalog.EmbeddingScheduler.
type ProductEmbeddingJobs struct {
	Client    client.Client
	TaskQueue string
	// Names finds the names of the workflows' summaries (summary.Store); nil: ids only.
	Names Namer
}

var _ catalog.EmbeddingScheduler = (*ProductEmbeddingJobs)(nil)

// ScheduleEmbeddings signals the tenant's ProductEmbeddings workflow, starting it when none runs.
func (j *ProductEmbeddingJobs) ScheduleEmbeddings(ctx context.Context, tenantID int64) error {
	id := ProductEmbeddingsID(tenantID)
	names := lookup(ctx, j.Names, tenantID, summary.Tenant, tenantID)
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, SignalEmbed, nil, productEmbeddingsMeta(tenantID, names).startOptions(id, j.TaskQueue, TenantSearchAttributes(tenantID)), ProductEmbeddings, ProductEmbeddingsInput{TenantID: tenantID, Limit: EmbedBatch})
	return unavailable("schedule product embeddings", err)
}
