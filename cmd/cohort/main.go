// Command cohort is Cohort's one binary: serve (HTTP API), worker (Temporal worker and event
// loader), dev (everything in one process on embedded defaults), migrate, and tenants.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/telemetry"
)

const usage = `usage: cohort <command> [flags]

commands:
  dev       run API, worker, Temporal (with Web UI), Pub/Sub and Postgres in one process on embedded defaults
  serve     run the HTTP API (production; configured from the environment)
  worker    run the Temporal worker and the event loader (production)
  migrate   apply schema migrations to DATABASE_URL
  tenants   create a tenant, mint tokens, rotate and revoke keys (cohort tenants help)
  secret-key reseal
            re-encrypt stored secrets with a rotated COHORT_SECRET_KEY (cohort secret-key help)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		_, _ = fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "cohort: "+err.Error())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cmd, rest := args[0], args[1:]
	logger := newLogger(cfg, stderr, cmd == "dev")
	switch cmd {
	case "dev", "serve", "worker", "migrate":
		logger.Info("cohort starting", "command", cmd, "version", api.Version)
	}
	switch cmd {
	case "dev", "serve", "worker":
		// OpenTelemetry tracing: exported over OTLP when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is
		// set, otherwise off; spans still buffered are flushed on the way out.
		shutdown, terr := telemetry.Setup(ctx, cfg.Telemetry, telemetry.Service{Version: api.Version, Role: cmd, Logger: logger})
		if terr != nil {
			_, _ = fmt.Fprintf(stderr, "cohort %s: %v\n", cmd, terr)
			return 2
		}
		if cfg.Telemetry.TracingEnabled() {
			logger.Info("tracing on", "otlp_endpoint", cfg.Telemetry.Endpoint, "service", cfg.Telemetry.ServiceName)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				logger.Warn("flush traces", "error", err)
			}
		}()
	}
	switch cmd {
	case "dev":
		err = runDev(ctx, cfg, logger, stdout)
	case "serve":
		err = runServe(ctx, cfg, logger)
	case "worker":
		err = runWorker(ctx, cfg, logger)
	case "migrate":
		err = runMigrate(ctx, cfg, logger, stdout)
	case "tenants":
		err = runTenants(ctx, cfg, logger, rest, stdout)
	case "secret-key":
		err = runSecretKey(ctx, cfg, logger, rest, stdout)
	default:
		_, _ = fmt.Fprintf(stderr, "cohort: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "cohort %s: %v\n", cmd, err)
		// Missing settings and bad arguments are usage errors (2); anything else failed (1).
		var me *config.MissingError
		if errors.As(err, &me) || errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

func newLogger(cfg *config.Config, w io.Writer, dev bool) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if dev && os.Getenv("COHORT_LOG_FORMAT") == "" {
		format = "text"
	}
	if strings.EqualFold(format, "text") {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
