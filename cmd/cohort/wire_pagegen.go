package main

import (
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/search"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// pagesWorker returns the registration of page generation's activities (the PageGenerate and
// PageBulkGenerate workflows'), over a page service, the role's semantic
// search (searchFor) and the AI provider that writes the copy. The page service's generator is
// the process's one workflows.Starter, as the API's is (pagesAPI).
func (c *core) pagesWorker(st *workflows.Starter, provider ai.Provider, srch *search.Service) worker.Registration {
	pages := c.openPages(st)
	acts := activities.NewPages(pages, srch, provider, activities.WithEmbeddingWait(c.cfg.AI.PageEmbeddingWait),
		activities.WithPageMetrics(c.metrics))
	return func(r sdkworker.Registry) {
		r.RegisterActivity(acts)
	}
}
