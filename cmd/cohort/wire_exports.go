package main

import (
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// openExports builds the page export service over the core's database and blob store; starter
// starts builds (nil in the worker, which only runs them). The design tokens are the tenant's
// design system.
func (c *core) openExports(starter pageexport.Starter) *pageexport.Service {
	return pageexport.NewService(pageexport.Deps{
		Pool:    c.db.Pool,
		Pages:   c.openPages(nil),
		Keys:    pageexport.NewKeys(c.db.Pool, time.Now),
		Design:  pageexport.DesignStore{Store: design.NewStore(c.db.Pool, time.Now)},
		Blob:    c.blob,
		Starter: starter,
		Now:     time.Now,
	})
}

// exportsAPI sets the page export endpoints' dependencies (POST and GET
// /api/ai-pages/pages/<id>/export/); exports need the blob store.
func (c *core) exportsAPI(d *api.Deps, st *workflows.Starter) {
	if c.blob == nil {
		return
	}
	svc := c.openExports(st)
	d.Exports = &api.ExportsDeps{Service: svc, PublicURL: c.cfg.PublicBaseURL}
}

// exportsWorker registers the page export activities.
func (c *core) exportsWorker() worker.Registration {
	acts := &activities.Exports{Svc: c.openExports(nil), Metrics: c.metrics}
	return func(r sdkworker.Registry) {
		r.RegisterActivity(acts)
	}
}
