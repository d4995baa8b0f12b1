package main

import (
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/workflows"
)

// catalogParts are the product catalogue's services, shared by the API and the worker.
type catalogParts struct {
	svc     *catalog.Service
	imports *imports.Service
}

// catalogue opens the catalogue's services once.
func (c *core) catalogue() *catalogParts {
	if c.cat == nil {
		svc := catalog.NewService(c.db.Pool, time.Now)
		c.cat = &catalogParts{svc: svc, imports: imports.NewService(c.db.Pool, svc, c.blob, time.Now)}
	}
	return c.cat
}

// catalogAPI builds the /api/pim/ endpoints' dependencies: confirming an import starts its
// workflow.
func (c *core) catalogAPI(tc client.Client) *api.CatalogDeps {
	p := c.catalogue()
	p.imports.SetStarter(&workflows.CatalogImportJobs{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue})
	return &api.CatalogDeps{Service: p.svc, Imports: p.imports}
}

// catalogWorker registers the catalogue's workflows and activities.
func (c *core) catalogWorker() func(r sdkworker.Registry) {
	p := c.catalogue()
	acts := &activities.CatalogImports{Svc: p.imports}
	return func(r sdkworker.Registry) {
		r.RegisterWorkflow(workflows.CatalogImport)
		r.RegisterActivity(acts)
	}
}
