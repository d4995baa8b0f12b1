package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/tclient"
	"github.com/cohort-dev/cohort/worker"
)

func runServe(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	if err := cfg.Validate(config.RoleServe); err != nil {
		return err
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = ":8080"
	}
	c, err := openCore(ctx, cfg, logger, coreOptions{blob: true})
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.serveMetrics(ctx, config.RoleServe); err != nil {
		return err
	}
	tc, err := tclient.Dial(ctx, cfg.Temporal, logger, c.temporalMetrics())
	if err != nil {
		return err
	}
	defer tc.Close()
	in, err := c.openIngestion(ctx, embeddedBus{})
	if err != nil {
		return err
	}
	provider, providerErr := c.openAI()
	st := c.starter(tc)
	srv := c.newAPI(ctx, in, c.openSegments(in), c.openCatalog(st), st, c.searchFor(ctx, provider, providerErr))
	addr, done, err := serveHTTP(ctx, cfg.HTTPAddr, srv.Handler(), logger, cfg.ShutdownTimeout)
	if err != nil {
		return err
	}
	logger.Info("serving HTTP API", "addr", addr.String())
	return <-done
}

func runWorker(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	if err := cfg.Validate(config.RoleWorker); err != nil {
		return err
	}
	c, err := openCore(ctx, cfg, logger, coreOptions{blob: true})
	if err != nil {
		return err
	}
	defer c.close()
	// The worker has no HTTP API: its probes and Prometheus use this listener.
	if err := c.serveMetrics(ctx, config.RoleWorker); err != nil {
		return err
	}
	tc, err := tclient.Dial(ctx, cfg.Temporal, logger, c.temporalMetrics())
	if err != nil {
		return err
	}
	defer tc.Close()
	tclient.NewSearchAttributes(tc, cfg.Temporal.Namespace, logger).Startup(ctx)
	in, err := c.openIngestion(ctx, embeddedBus{})
	if err != nil {
		return err
	}
	loader, err := c.loader(in)
	if err != nil {
		return err
	}
	provider, err := c.openAI()
	if err != nil {
		return err
	}
	st := c.starter(tc)
	segReg := c.segmentsWorker(c.openSegments(in), provider)
	cat := c.openCatalog(st)
	catReg, sweeper := c.catalogWorker(cat, provider)
	pageReg := c.pagesWorker(st, provider, c.searchFor(ctx, provider, nil))
	return worker.New(c.workerDeps(tc, []worker.Registration{segReg, catReg, pageReg, c.feedsWorker(st, cat), c.exportsWorker()}, loader, sweeper)).Run(ctx)
}

func runMigrate(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdout io.Writer) error {
	if err := cfg.Validate(config.RoleMigrate); err != nil {
		return err
	}
	db, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrate(ctx, db, logger); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, `{"status":"ok"}`)
	return err
}
