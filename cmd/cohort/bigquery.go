package main

import (
	"context"
	"time"

	"github.com/cohort-dev/cohort/internal/warehouse"
	"github.com/cohort-dev/cohort/internal/warehouse/bigquery"
)

// openBigQuery connects the production warehouse and makes sure its table exists (partitioned by
// day on occurred_at, clustered by tenant_id, event_type, user_id). Credentials come from the
// environment (Workload Identity on GKE).
func openBigQuery(ctx context.Context, c *core) (warehouse.Writer, error) {
	w, err := bigquery.New(ctx, bigquery.Config{Project: c.cfg.BigQuery.Project, Dataset: c.cfg.BigQuery.Dataset, Now: time.Now})
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, func() { _ = w.Close() })
	if err := w.EnsureTable(ctx); err != nil {
		// The table is normally provisioned ahead (schema/bigquery/README.md); a role without
		// tables.create can still write to an existing one.
		c.log.Warn("could not ensure the bigquery events table", "table", w.TableID(), "error", err)
	}
	return w, nil
}
