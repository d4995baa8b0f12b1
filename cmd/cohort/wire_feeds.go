package main

import (
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/feed"
	"github.com/cohort-dev/cohort/internal/safehttp"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// openFeeds builds the feed service over a catalogue. Feeds are fetched through the SSRF-safe
// client (loopback and private addresses only with COHORT_ALLOW_PRIVATE_NETWORKS), capped at
// feed.DefaultMaxBytes and feed.DefaultTimeout; syncs are started through st.
func (c *core) openFeeds(st *workflows.Starter, cat feed.Catalog) *feed.Service {
	opts := feed.Options{AllowPrivate: c.cfg.AllowPrivateNetworks}
	opts.HTTP = safehttp.NewClient(safehttp.Options{
		AllowPrivate: opts.AllowPrivate, Timeout: feed.DefaultTimeout, MaxResponseBytes: feed.DefaultMaxBytes, Logger: c.log,
	})
	return feed.NewService(c.db.Pool, cat, st, time.Now, opts)
}

// feedsAPI sets the /api/ai-pages/feeds/ endpoints' dependencies. The API only reads the product
// schema (field_map validation); the worker's sync writes products.
func (c *core) feedsAPI(d *api.Deps, st *workflows.Starter) {
	d.Feeds = &api.FeedsDeps{Service: c.openFeeds(st, catalog.NewService(c.db.Pool, time.Now))}
}

// feedsWorker registers the FeedSync activities over the role's catalogue, whose
// bulk upserts queue embeddings and kick the tenant's embedding workflow.
func (c *core) feedsWorker(st *workflows.Starter, cat *catalogParts) worker.Registration {
	acts := &activities.Feeds{Svc: c.openFeeds(st, cat.svc), Metrics: c.metrics}
	return func(r sdkworker.Registry) {
		r.RegisterActivity(acts)
	}
}
