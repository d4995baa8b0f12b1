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
	"time"

	"google.golang.org/api/option"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/devstack/temporalsrv"
	"github.com/cohort-dev/cohort/internal/tclient"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
)

// Embedded Pub/Sub names of cohort dev.
const (
	devPubSubProject = "cohort-dev"
	devTopic         = "cohort-events"
	devSubscription  = "cohort-events-loader"
)

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
		case <-time.After(10 * time.Second):
			logger.Error("shutdown took longer than 10s; exiting anyway")
		}
	}()

	pg, err := resolveEmbeddedDeps(ctx, cfg, logger)
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		if err := pg.Close(); err != nil {
			logger.Error("stop postgres", "error", err)
		}
	})

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

	pubsubAddr := "Google Cloud Pub/Sub project " + cfg.PubSub.Project
	var busOpts []option.ClientOption
	embeddedBus := cfg.PubSub.Project == ""
	if embeddedBus {
		emb, opts, err := bus.StartEmbedded()
		if err != nil {
			return err
		}
		stops = append(stops, func() { _ = emb.Close() })
		busOpts = opts
		cfg.PubSub = config.PubSubConfig{Project: devPubSubProject, Topic: devTopic, Subscription: devSubscription}
		pubsubAddr = "pstest " + emb.Addr() + " (topic " + devTopic + ")"
	}

	c, err := openCore(ctx, cfg, logger, coreOptions{migrate: true, blob: true})
	if err != nil {
		return err
	}
	stops = append(stops, c.close)
	in, err := c.openIngestion(ctx, busOpts)
	if err != nil {
		return err
	}
	if embeddedBus {
		if err := in.bus.EnsureTopology(ctx); err != nil {
			return err
		}
	}
	loader, err := c.loader(in)
	if err != nil {
		return err
	}

	tc, err := tclient.Dial(ctx, cfg.Temporal, logger)
	if err != nil {
		return err
	}
	stops = append(stops, tc.Close)

	segs := c.openSegments(in)
	segReg, err := c.segmentsWorker(segs)
	if err != nil {
		return err
	}
	wctx, cancelWorker := context.WithCancel(context.Background())
	catReg, err := c.catalogWorker(wctx, tc)
	if err != nil {
		cancelWorker()
		return err
	}
	workerDone := make(chan error, 1)
	go func() {
		workerDone <- worker.New(c.workerDeps(tc, []worker.Registration{segReg, catReg}, loader)).Run(wctx)
	}()
	stops = append(stops, func() { cancelWorker(); <-workerDone })

	srv := c.newAPI(wctx, in, segs, tc)
	addr, httpDone, err := serveHTTP(ctx, cfg.HTTPAddr, srv.Handler(), logger, 5*time.Second)
	if err != nil {
		return err
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
  Database     %s  [%s]
  Pub/Sub      %s
  Data dir     %s
Create a tenant:  go run ./cmd/cohort tenants create --slug acme
`, addr, ui, temporalAddr, cfg.Temporal.Namespace, redactURL(cfg.DatabaseURL), pg.Source, pubsubAddr, dataDir)

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
