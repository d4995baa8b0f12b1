package main

import (
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// catalogParts are the product catalogue's services. A role builds them once (openCatalog) and
// hands them to the API and the worker it runs.
type catalogParts struct {
	svc        *catalog.Service
	imports    *imports.Service
	segments   *prodseg.Service
	embeddings *workflows.Starter
}

// openCatalog builds the catalogue's services. Every save that changes a product's embedding
// text (API, bulk, import) kicks the tenant's embedding workflow through st; confirming an
// import and requesting a product segment's compute start their workflows through st.
func (c *core) openCatalog(st *workflows.Starter) *catalogParts {
	svc := catalog.NewService(c.db.Pool, time.Now, catalog.WithEmbeddingScheduler(st, func(tenantID int64, err error) {
		c.log.Warn("kick product embeddings (the sweep retries within a minute)", "tenant", tenantID, "error", err)
	}))
	return &catalogParts{
		svc:        svc,
		imports:    imports.NewService(c.db.Pool, svc, c.blob, st, time.Now),
		segments:   prodseg.NewService(c.db.Pool, svc, st, time.Now),
		embeddings: st,
	}
}

// openAI builds the LLM and embedding provider from the config, metered by the core's spend
// service (wire_aispend.go). A role builds it once and passes it to what needs it.
func (c *core) openAI() (ai.Provider, error) {
	p, err := ai.New(ai.Config{
		Provider: c.cfg.AI.Provider, BaseURL: c.cfg.AI.BaseURL, APIKey: c.cfg.AI.APIKey,
		ChatModel: c.cfg.AI.ChatModel, EmbeddingModel: c.cfg.AI.EmbeddingModel, Dimensions: c.cfg.AI.Dimensions,
		Metrics: c.aiMetrics,
		Timeout: c.cfg.AI.Timeout,
	})
	if err != nil {
		return nil, err
	}
	return c.meteredAI(p), nil
}

// catalogAPI builds the /api/pim/ endpoints' dependencies.
func (c *core) catalogAPI(p *catalogParts) *api.CatalogDeps {
	return &api.CatalogDeps{Service: p.svc, Imports: p.imports}
}

// productSegmentsAPI builds the /api/product-segments/ endpoints' dependencies.
func (c *core) productSegmentsAPI(p *catalogParts) *api.ProductSegmentsDeps {
	return &api.ProductSegmentsDeps{Service: p.segments}
}

// catalogWorker returns the registration of the catalogue's activities (imports,
// embeddings, product segments) and the embedding sweeper, a consumer the worker role runs and
// stops with its other loops: once at start it queues products whose embedding is missing or
// from another model, then every minute it kicks every tenant with queued products, so a lost
// kick only delays.
func (c *core) catalogWorker(p *catalogParts, provider ai.Provider) (worker.Registration, worker.Consumer) {
	imps := &activities.CatalogImports{Svc: p.imports}
	embeds := &activities.ProductEmbeddings{Catalog: p.svc, AI: provider}
	segs := &activities.ProductSegments{Svc: p.segments}
	var embedder catalog.Embedder
	if provider != nil {
		embedder = provider
	}
	sweeper := catalog.NewEmbeddingSweeper(p.svc, p.embeddings, embedder, catalog.EmbedSweepEvery, c.log).WithMetrics(c.metrics)
	return func(r sdkworker.Registry) {
		r.RegisterActivity(imps)
		r.RegisterActivity(embeds)
		r.RegisterActivity(segs)
	}, sweeper
}
