package main

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/workflows"
)

// catalogParts are the product catalogue's services, shared by the API and the worker.
type catalogParts struct {
	svc        *catalog.Service
	imports    *imports.Service
	segments   *prodseg.Service
	embeddings *workflows.ProductEmbeddingJobs
}

// catalogue opens the catalogue's services once. Every save that changes a product's embedding
// text (API, bulk, import) kicks the tenant's embedding workflow through tc.
func (c *core) catalogue(tc client.Client) *catalogParts {
	if c.cat == nil {
		svc := catalog.NewService(c.db.Pool, time.Now)
		jobs := &workflows.ProductEmbeddingJobs{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue}
		svc.SetEmbeddingScheduler(jobs, func(tenantID int64, err error) {
			c.log.Warn("kick product embeddings (the sweep retries within a minute)", "tenant", tenantID, "error", err)
		})
		c.cat = &catalogParts{
			svc:        svc,
			imports:    imports.NewService(c.db.Pool, svc, c.blob, time.Now),
			segments:   prodseg.NewService(c.db.Pool, svc, time.Now),
			embeddings: jobs,
		}
	}
	return c.cat
}

// aiProvider is the LLM and embedding provider, built once from the config.
func (c *core) aiProvider() (ai.Provider, error) {
	if c.ai == nil {
		p, err := ai.New(ai.Config{
			Provider: c.cfg.AI.Provider, BaseURL: c.cfg.AI.BaseURL, APIKey: c.cfg.AI.APIKey,
			ChatModel: c.cfg.AI.ChatModel, EmbeddingModel: c.cfg.AI.EmbeddingModel, Dimensions: c.cfg.AI.Dimensions,
		})
		if err != nil {
			return nil, err
		}
		c.ai = p
	}
	return c.ai, nil
}

// catalogAPI builds the /api/pim/ endpoints' dependencies: confirming an import starts its
// workflow.
func (c *core) catalogAPI(tc client.Client) *api.CatalogDeps {
	p := c.catalogue(tc)
	p.imports.SetStarter(&workflows.CatalogImportJobs{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue})
	return &api.CatalogDeps{Service: p.svc, Imports: p.imports}
}

// productSegmentsAPI builds the /api/product-segments/ endpoints' dependencies.
func (c *core) productSegmentsAPI(tc client.Client) *api.ProductSegmentsDeps {
	return &api.ProductSegmentsDeps{
		Service: c.catalogue(tc).segments,
		Jobs:    &workflows.ProductSegmentJobs{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue},
	}
}

// catalogWorker registers the catalogue's workflows and activities (imports, embeddings,
// product segments) and runs the embedding sweeper until ctx ends: once at start it queues
// products whose embedding is missing or from another model, then every minute it kicks every
// tenant with queued products, so a lost kick only delays.
func (c *core) catalogWorker(ctx context.Context, tc client.Client) (func(r sdkworker.Registry), error) {
	p := c.catalogue(tc)
	provider, err := c.aiProvider()
	if err != nil {
		return nil, err
	}
	imps := &activities.CatalogImports{Svc: p.imports}
	embeds := &activities.ProductEmbeddings{Catalog: p.svc, AI: provider}
	segs := &activities.ProductSegments{Svc: p.segments}
	go workflows.RunEmbeddingSweeper(ctx, p.embeddings, p.svc, provider, 0, func(err error) {
		c.log.Warn("product embedding sweep", "error", err)
	})
	return func(r sdkworker.Registry) {
		r.RegisterWorkflow(workflows.CatalogImport)
		r.RegisterActivity(imps)
		r.RegisterWorkflow(workflows.ProductEmbeddings)
		r.RegisterActivity(embeds)
		r.RegisterWorkflow(workflows.ProductSegmentCompute)
		r.RegisterActivity(segs)
	}, nil
}
