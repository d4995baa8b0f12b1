package main

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
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
	s := &segments{svc: segment.NewService(c.db.Gorm, c.db.Pool, time.Now), connectors: c.openConnectors()}
	if bq, ok := in.warehouse.(*bigquery.Writer); ok {
		s.runner = bq.Segments()
	}
	return s
}

// segmentsAPI builds the segment endpoints' dependencies and the membership cache, whose
// listener runs until ctx ends.
func (c *core) segmentsAPI(ctx context.Context, s *segments, tc client.Client) *api.SegmentsDeps {
	cache := segment.NewMembershipCache(s.svc, c.db.Pool, c.log, segment.CacheOptions{})
	go func() { _ = cache.Run(ctx) }()
	return &api.SegmentsDeps{
		Service: s.svc,
		Cache:   cache,
		Jobs:    &workflows.SegmentJobs{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue},
		Runner:  s.runner,
		Blob:    c.blob,
	}
}

// segmentsWorker registers the segment workflows and activities.
func (c *core) segmentsWorker(s *segments) (func(r sdkworker.Registry), error) {
	provider, err := c.aiProvider()
	if err != nil {
		return nil, err
	}
	acts := &activities.Segments{Svc: s.svc, Runner: s.runner, Blob: c.blob, AI: provider, Connectors: s.connectors}
	activations := c.activationsWorker(s.connectors)
	return func(r sdkworker.Registry) {
		r.RegisterWorkflow(workflows.SegmentCompute)
		r.RegisterWorkflow(workflows.SegmentExport)
		r.RegisterWorkflow(workflows.SegmentDraft)
		r.RegisterActivity(acts)
		activations(r)
	}, nil
}
