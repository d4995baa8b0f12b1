//go:build !nodev

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/devstack/temporalsrv"
	"github.com/cohort-dev/cohort/internal/tclient"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// Embedded Pub/Sub names of cohort dev with COHORT_BUS=pubsub and no PUBSUB_PROJECT.
const (
	devPubSubProject = "cohort-dev"
	devTopic         = "cohort-events"
	devSubscription  = "cohort-events-loader"
)

// devMemoryLimit is cohort dev's soft limit on the Go runtime's memory (GOMEMLIMIT overrides it).
// At 400 MiB the process peaked at 576-603 MB during 5M events (BenchmarkDevRSS); at 340 MiB at
// 502-520 MB, with no fewer events stored per second.
const devMemoryLimit = 340 << 20

// devShutdownBudget is how long cohort dev takes to stop everything after the HTTP server has,
// beyond the worker's stop timeout.
const devShutdownBudget = 10 * time.Second

// devWorkerStopTimeout is the worker's stop timeout in cohort dev unless
// COHORT_WORKER_STOP_TIMEOUT is set: Ctrl-C on a laptop should not wait for a pod's grace period.
const devWorkerStopTimeout = 5 * time.Second

// runDev runs the whole service in one process on embedded defaults.
func runDev(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdout io.Writer) error {
	if err := cfg.Validate(config.RoleDev); err != nil {
		return err
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	cfg.DataDir = dataDir
	// One process holds the API, the worker, Temporal and the bus: keep its heap to a laptop's
	// size under sustained load (the collector works harder near the limit instead of letting the
	// heap double). GOMEMLIMIT set by the user wins.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(devMemoryLimit)
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:8080"
	}
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = "http://" + cfg.HTTPAddr
	}
	if cfg.Warehouse == "bigquery" && cfg.BigQuery.Project == "" {
		cfg.Warehouse = "postgres"
	}
	if cfg.Blob == "gcs" && cfg.GCSBucket == "" {
		cfg.Blob = "local"
	}
	if _, set := os.LookupEnv("COHORT_WORKER_STOP_TIMEOUT"); !set {
		cfg.WorkerStopTimeout = devWorkerStopTimeout
	}
	budget := cfg.WorkerStopTimeout + devShutdownBudget

	// Everything started below is stopped in reverse order, within the shutdown budget.
	var stops []func()
	defer func() {
		done := make(chan struct{})
		go func() {
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(budget):
			logger.Error("shutdown took longer than the worker's stop timeout and 10s; exiting anyway (accepted events not yet stored stay in the bus and are loaded on the next start)",
				"budget", budget.String())
		}
	}()

	pg, err := resolveEmbeddedDeps(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		if err := pg.Close(); err != nil {
			logger.Error("stop postgres", "error", err)
		}
	})

	// The database first: a wrong secret key (keycheck) stops dev before anything else starts.
	c, err := openCore(ctx, cfg, logger, coreOptions{migrate: true, blob: true, metricsOnAPI: cfg.MetricsListen(config.RoleDev) == ""})
	if err != nil {
		return err
	}
	stops = append(stops, c.close)
	// With COHORT_METRICS_ADDR, /metrics is served there (as in production) instead of on the API port.
	if err := c.serveMetrics(ctx, config.RoleDev); err != nil {
		return err
	}

	temporalAddr, uiURL := cfg.Temporal.Address, ""
	if temporalAddr == "" {
		ts, err := temporalsrv.Start(ctx, temporalsrv.Options{
			FrontendPort:     cfg.DevTemporalPort,
			UIPort:           cfg.DevUIPort,
			DatabaseFile:     filepath.Join(dataDir, "temporal.db"),
			Namespace:        cfg.Temporal.Namespace,
			SearchAttributes: workflows.SearchAttributeTypes(),
			Logger:           logger,
		})
		if err != nil {
			return err
		}
		stops = append(stops, ts.Stop)
		temporalAddr = ts.FrontendAddress()
		cfg.Temporal.Address = temporalAddr
		if ts.UIAddress() != "" {
			uiURL = "http://" + ts.UIAddress()
		}
	}

	var emb embeddedBus
	busAddr, stopBus, err := startDevBus(cfg, dataDir, logger, &emb)
	if err != nil {
		return err
	}
	if stopBus != nil {
		stops = append(stops, stopBus)
	}

	in, err := c.openIngestion(ctx, emb)
	if err != nil {
		return err
	}
	stops = append(stops, in.closeBus) // before the embedded bus server stops
	loader, err := c.loader(in)
	if err != nil {
		return err
	}

	tc, err := tclient.Dial(ctx, cfg.Temporal, logger, c.temporalMetrics())
	if err != nil {
		return err
	}
	stops = append(stops, tc.Close)

	segs := c.openSegments(in)
	provider, err := c.openAI()
	if err != nil {
		return err
	}
	st := c.starter(tc)
	cat := c.openCatalog(st)
	segReg := c.segmentsWorker(segs, provider)
	catReg, sweeper := c.catalogWorker(cat, provider)
	srch := c.searchFor(ctx, provider, nil) // one vector index for the API and the worker
	pageReg := c.pagesWorker(st, provider, srch)
	wctx, cancelWorker := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	go func() {
		workerDone <- worker.New(c.workerDeps(tc, []worker.Registration{segReg, catReg, pageReg, c.feedsWorker(st, cat), c.exportsWorker()}, loader, sweeper)).Run(wctx)
	}()
	stops = append(stops, func() { cancelWorker(); <-workerDone })

	srv := c.newAPI(wctx, in, segs, cat, st, srch)
	addr, httpDone, err := serveHTTP(ctx, cfg.HTTPAddr, srv.Handler(), logger, 5*time.Second)
	if err != nil {
		return err
	}
	// Stopped first: the HTTP server has stopped by then (the reads of its last requests are
	// counted), and the final flush of page views does not wait for the worker's stop.
	if c.stopPageCounts != nil {
		stops = append(stops, c.stopPageCounts)
	}

	ui := uiURL
	if ui == "" {
		ui = "(none: external Temporal at " + temporalAddr + ")"
	}
	_, _ = fmt.Fprintf(stdout, `
Cohort dev is running. Ctrl-C stops everything.
  API          http://%s   (contract: /openapi.yaml, readiness: /readyz)
  Temporal UI  %s
  Temporal     %s (namespace %s)
  Database     %s
  Event bus    %s
  Data dir     %s
Create a tenant:  go run ./cmd/cohort tenants create --slug acme
`, addr, ui, temporalAddr, cfg.Temporal.Namespace, databaseBanner(pg, cfg.DatabaseURL), busAddr, dataDir)

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return ignoreClosed(<-httpDone)
	case err := <-httpDone:
		return ignoreClosed(err)
	case err := <-workerDone:
		workerDone <- err // let the stop func's receive complete
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		return errors.New("worker stopped unexpectedly")
	}
}

// startDevBus starts the embedded event bus unless the configuration names a real one: NATS
// JetStream with file storage in the data dir by default, so that an event answered 202 survives
// Ctrl-C and crashes; pstest with COHORT_BUS=pubsub (in memory: for comparisons, not for data).
// It fills emb and returns a description for the banner and the bus's stop function.
func startDevBus(cfg *config.Config, dataDir string, logger *slog.Logger, emb *embeddedBus) (string, func(), error) {
	switch {
	case cfg.NATS.URL != "" && cfg.EventBus() == "nats":
		return "NATS JetStream " + redactURL(cfg.NATS.URL) + " (stream " + cfg.NATS.Stream + ")", nil, nil
	case cfg.PubSub.Project != "" && cfg.EventBus() == "pubsub":
		return "Google Cloud Pub/Sub project " + cfg.PubSub.Project, nil, nil
	case cfg.Bus == "pubsub":
		srv, opts, err := bus.StartEmbeddedPubSub()
		if err != nil {
			return "", nil, err
		}
		emb.pubsub = opts
		cfg.PubSub = config.PubSubConfig{Project: devPubSubProject, Topic: devTopic, Subscription: devSubscription}
		return "pstest " + srv.Addr() + " (in memory: events not yet stored are lost when dev stops)", func() { _ = srv.Close() }, nil
	}
	dir := filepath.Join(dataDir, "nats")
	srv, err := bus.StartEmbeddedNATS(bus.EmbeddedNATSOptions{
		Dir: dir, Listen: cfg.DevNATSAddr, MaxStore: cfg.NATS.MaxBytes + 64<<20, Logger: logger,
	})
	if err != nil {
		return "", nil, err
	}
	emb.nats = srv
	cfg.Bus = "nats"
	where := "in-process"
	if u := srv.ClientURL(); u != "" {
		where = u
	}
	return "NATS JetStream, embedded (" + where + ", stream " + cfg.NATS.Stream + ", files in " + dir + ")", srv.Shutdown, nil
}
