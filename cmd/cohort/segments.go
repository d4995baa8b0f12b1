package main

import (
	"context"
	"log/slog"
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/warehouse/bigquery"
	"github.com/cohort-dev/cohort/workflows"
)

// segments holds the segment capability's parts, with the activation connectors that sync them.
type segments struct {
	svc        *segment.Service
	runner     segment.Runner // nil: the embedded Postgres warehouse
	connectors *connector.Service
}

func (c *core) openSegments(in *ingestion) *segments {
	// The worker's service starts no workflows; the API builds its own (segmentsAPI).
	s := &segments{svc: segment.NewService(c.db.Gorm, c.db.Pool, time.Now, nil), connectors: c.openConnectors()}
	if bq, ok := in.warehouse.(*bigquery.Writer); ok {
		s.runner = bq.Segments()
	}
	return s
}

// segmentsAPI builds the segment endpoints' dependencies: a service that starts the segment
// workflows through st, and the membership cache, whose listener runs until ctx ends or the core
// closes (which waits for it).
func (c *core) segmentsAPI(ctx context.Context, s *segments, st *workflows.Starter) *api.SegmentsDeps {
	svc := segment.NewService(c.db.Gorm, c.db.Pool, time.Now, st)
	cache := segment.NewMembershipCache(svc, c.db.Pool, c.log, segment.CacheOptions{})
	c.closers = append(c.closers, superviseCache(ctx, cache, c.log))
	return &api.SegmentsDeps{
		Service: svc,
		Cache:   cache,
		Runner:  s.runner,
		Blob:    c.blob,
	}
}

// superviseCache runs the cache's listener until ctx ends or the returned stop is called; stop
// waits for it. Run reconnects after failures (logging each); an error it returns is logged.
func superviseCache(ctx context.Context, cache *segment.MembershipCache, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := cache.Run(ctx); err != nil {
			log.Error("membership cache stopped; lookups are served from the database", "error", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// segmentsWorker registers the segment activities; provider drafts ai segments
// (the role builds it once: openAI).
func (c *core) segmentsWorker(s *segments, provider ai.Provider) func(r sdkworker.Registry) {
	acts := &activities.Segments{Svc: s.svc, Runner: s.runner, Blob: c.blob, AI: provider, Connectors: s.connectors, Metrics: c.metrics}
	activations := c.activationsWorker(s.connectors)
	return func(r sdkworker.Registry) {
		r.RegisterActivity(acts)
		activations(r)
	}
}
