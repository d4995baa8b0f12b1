package workflows

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// EmbedSweepEvery is how often the worker's sweep kicks the tenants with queued embeddings.
const EmbedSweepEvery = time.Minute

// ProductEmbeddingJobs starts or wakes the tenants' embedding workflows (client side). It is the
// catalogue's catalog.EmbeddingScheduler.
type ProductEmbeddingJobs struct {
	Client    client.Client
	TaskQueue string
}

var _ catalog.EmbeddingScheduler = (*ProductEmbeddingJobs)(nil)

// ScheduleEmbeddings signals the tenant's ProductEmbeddings workflow, starting it when none runs.
func (j *ProductEmbeddingJobs) ScheduleEmbeddings(ctx context.Context, tenantID int64) error {
	id := ProductEmbeddingsID(tenantID)
	_, err := j.Client.SignalWithStartWorkflow(ctx, id, SignalEmbed, nil, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                j.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    TenantSearchAttributes(tenantID),
	}, ProductEmbeddings, ProductEmbeddingsInput{TenantID: tenantID, Limit: EmbedBatch})
	return unavailable("schedule product embeddings", err)
}

// EmbeddingQueues is the part of the catalogue the sweep reads.
type EmbeddingQueues interface {
	QueuedTenants(ctx context.Context) ([]int64, error)
}

// SweepEmbeddings kicks the embedding workflow of every tenant with ready queued products, so a
// kick lost after a save (Temporal briefly down, a crash between commit and kick) only delays
// the work. It stops at the first failed kick (the next sweep tries again) and returns how many
// tenants it kicked.
func SweepEmbeddings(ctx context.Context, jobs catalog.EmbeddingScheduler, queues EmbeddingQueues) (int, error) {
	tenants, err := queues.QueuedTenants(ctx)
	if err != nil {
		return 0, err
	}
	for i, t := range tenants {
		if err := jobs.ScheduleEmbeddings(ctx, t); err != nil {
			return i, fmt.Errorf("sweep product embeddings of tenant %d: %w", t, err)
		}
	}
	return len(tenants), nil
}

// RunEmbeddingSweeper is the worker's embedding upkeep until ctx ends: once at start it queues
// the products whose embedding is missing or of another model than the provider's (a changed
// model re-embeds the catalogues), then it runs SweepEmbeddings now and every interval
// (EmbedSweepEvery when 0). Errors go to onError (may be nil) and never stop it.
func RunEmbeddingSweeper(ctx context.Context, jobs catalog.EmbeddingScheduler, svc *catalog.Service, provider catalog.Embedder,
	every time.Duration, onError func(error)) {
	report := func(err error) {
		if err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
	}
	if every <= 0 {
		every = EmbedSweepEvery
	}
	if provider != nil {
		_, err := svc.QueueStaleEmbeddings(ctx, provider.EmbeddingModel(), provider.Dimensions())
		report(err)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		_, err := SweepEmbeddings(ctx, jobs, svc)
		report(err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
