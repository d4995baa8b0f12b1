package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cohort-dev/cohort/internal/metrics"
)

// EmbedSweepEvery is how often the sweeper kicks the tenants with queued embeddings.
const EmbedSweepEvery = time.Minute

// EmbeddingSweeper is the worker role's embedding upkeep, a long-running loop the role starts
// and stops (worker.Consumer): once at start it queues the products whose embedding is missing
// or of another model than the provider's (a changed model re-embeds the catalogues), then it
// sweeps now and every interval, kicking the drain of every tenant with ready queued products,
// so a kick lost after a save (Temporal briefly down, a crash between commit and kick) only
// delays the work.
type EmbeddingSweeper struct {
	svc      *Service
	sched    EmbeddingScheduler
	embedder Embedder // nil: nothing to re-queue for (no provider)
	every    time.Duration
	log      *slog.Logger
	metrics  *metrics.Metrics // nil: the backlog is not measured
}

// NewEmbeddingSweeper builds the sweeper. every <= 0 means EmbedSweepEvery; embedder may be nil.
func NewEmbeddingSweeper(svc *Service, sched EmbeddingScheduler, embedder Embedder, every time.Duration, logger *slog.Logger) *EmbeddingSweeper {
	if every <= 0 {
		every = EmbedSweepEvery
	}
	return &EmbeddingSweeper{svc: svc, sched: sched, embedder: embedder, every: every, log: logger}
}

// WithMetrics makes every sweep measure the embedding backlog (its size and the age of its oldest
// product, cohort_embedding_backlog_*) on m.
func (w *EmbeddingSweeper) WithMetrics(m *metrics.Metrics) *EmbeddingSweeper {
	w.metrics = m
	return w
}

// Name names the loop in the worker's errors.
func (w *EmbeddingSweeper) Name() string { return "product embedding sweeper" }

// Run sweeps until ctx ends, then returns nil. A failed sweep (the database or Temporal down) is
// logged and tried again at the next tick: the queue keeps the work meanwhile. Without a
// scheduler there is nothing to kick: Run says so at once.
func (w *EmbeddingSweeper) Run(ctx context.Context) error {
	if w.sched == nil {
		return errors.New("no embedding scheduler to kick")
	}
	if w.embedder != nil {
		if n, err := w.svc.QueueStaleEmbeddings(ctx, w.embedder.EmbeddingModel(), w.embedder.Dimensions()); err != nil {
			w.report(ctx, "queue stale product embeddings", err)
		} else if n > 0 {
			w.log.InfoContext(ctx, "queued products for embedding with the current model", "products", n, "model", w.embedder.EmbeddingModel())
		}
	}
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		if _, err := w.Sweep(ctx); err != nil {
			w.report(ctx, "sweep product embeddings", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (w *EmbeddingSweeper) report(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		w.log.WarnContext(ctx, what+" (tried again at the next sweep)", "error", err)
	}
}

// Sweep kicks the drain of every tenant with ready queued products. It stops at the first failed
// kick (the next sweep tries again) and returns how many tenants it kicked. With metrics it
// measures the backlog first.
func (w *EmbeddingSweeper) Sweep(ctx context.Context) (int, error) {
	if w.metrics != nil {
		n, oldest, err := w.svc.EmbeddingBacklog(ctx)
		if err != nil {
			return 0, err
		}
		var age time.Duration
		if !oldest.IsZero() {
			age = w.svc.now().Sub(oldest)
		}
		w.metrics.EmbeddingBacklog(n, age)
	}
	tenants, err := w.svc.QueuedTenants(ctx)
	if err != nil {
		return 0, err
	}
	for i, t := range tenants {
		if err := w.sched.ScheduleEmbeddings(ctx, t); err != nil {
			return i, fmt.Errorf("kick the product embeddings of tenant %d: %w", t, err)
		}
	}
	return len(tenants), nil
}
