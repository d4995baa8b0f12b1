package main

import (
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/search"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// pagesWorker returns the registration of page generation: the PageGenerate and
// PageBulkGenerate workflows and their activities, over a page service, the role's semantic
// search (searchFor) and the AI provider that writes the copy. The page service's generator is
// the same workflows.PageJobs the API's is (pagesAPI), so both start the same workflows.
func (c *core) pagesWorker(tc client.Client, provider ai.Provider, srch *search.Service) worker.Registration {
	pages := c.openPages(&workflows.PageJobs{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue, Names: workflows.NamesFrom(c.db.Pool)})
	acts := activities.NewPages(pages, srch, provider, activities.WithEmbeddingWait(c.cfg.AI.PageEmbeddingWait))
	return func(r sdkworker.Registry) {
		r.RegisterWorkflow(workflows.PageGenerate)
		r.RegisterWorkflow(workflows.PageBulkGenerate)
		r.RegisterActivity(acts)
	}
}
