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
  dev       run everything in one process on embedded defaults: the HTTP API, the worker, a Temporal
            server (with Web UI), NATS JetStream (embedded, files in the data dir) and Postgres (a
            server on 127.0.0.1:5432 or a private cluster it starts)
  serve     run the HTTP API (production; configured from the environment)
  worker    run the Temporal worker and the event loader, which reads the event bus (Pub/Sub or NATS
            JetStream) into the warehouse (production)
  migrate   apply schema migrations to DATABASE_URL
  tenants   create a tenant, mint tokens, rotate and revoke keys
  secret-key reseal
            re-encrypt stored secrets with a rotated COHORT_SECRET_KEY

cohort <command> --help describes a command; cohort tenants <command> --help one tenants command.
The settings (environment variables) are listed in README.md under Production.
`

const devUsage = `usage: cohort dev

Runs the whole service in one process on embedded defaults, for a laptop or a test:
  - the HTTP API on COHORT_HTTP_ADDR (default 127.0.0.1:8080)
  - the worker (Temporal workflows and activities, the event loader)
  - a Temporal dev server (SQLite in the data dir) on COHORT_DEV_TEMPORAL_PORT (7233), with its Web
    UI on COHORT_DEV_UI_PORT (8233); none with TEMPORAL_ADDRESS set
  - NATS JetStream, embedded, with file storage in the data dir (also on COHORT_DEV_NATS_ADDR when
    set); NATS_URL or PUBSUB_PROJECT use a real bus, COHORT_BUS=pubsub runs pstest in memory
  - Postgres: DATABASE_URL; else a server on 127.0.0.1:5432 (user postgres, trust); else a private
    cluster started with initdb and pg_ctl in the data dir. Without DATABASE_URL each data dir has
    its own database (named in the data dir's file "database", e.g. cohort_1a2b3c4d).
State lives in the data dir, COHORT_DATA_DIR (default .cohort): the dev secret key, the database's
name, Temporal's SQLite, the NATS stream, blobs. Migrations run at start; Ctrl-C stops everything.
`

const serveUsage = `usage: cohort serve

Runs the HTTP API (stateless; run as many as you like) on COHORT_HTTP_ADDR (default :8080), with
/metrics and /healthz on COHORT_METRICS_ADDR (default :9090). Needs DATABASE_URL, TEMPORAL_ADDRESS,
COHORT_SECRET_KEY, COHORT_PUBLIC_URL, the event bus (PUBSUB_PROJECT and PUBSUB_TOPIC, or NATS_URL),
the warehouse (BIGQUERY_PROJECT and BIGQUERY_DATASET, or COHORT_WAREHOUSE=postgres) and the blob
store (GCS_BUCKET, or COHORT_BLOB_STORE=local), and OPENAI_API_KEY with COHORT_AI_PROVIDER=openai;
a missing one is named at start. It does not migrate: run cohort migrate first. On SIGTERM it
stops accepting and lets requests in flight finish within COHORT_SHUTDOWN_TIMEOUT (default 8s).
`

const workerUsage = `usage: cohort worker

Runs the Temporal worker (segment computes, activations, catalogue imports, page generation, feeds,
exports) and the event loader, which reads the event bus (Pub/Sub subscription or NATS JetStream
consumer) into the warehouse. Its probes and /metrics are on COHORT_METRICS_ADDR (default :9090).
Needs the settings of cohort serve (but COHORT_PUBLIC_URL) and PUBSUB_SUBSCRIPTION with Pub/Sub.
On SIGTERM it stops polling and lets running activities finish within COHORT_WORKER_STOP_TIMEOUT
(default 50s; heartbeating ones hand back at once), then closes its client.
`

const migrateUsage = `usage: cohort migrate

Applies the schema migrations (schema/) to DATABASE_URL and prints {"status":"ok"}. Migrations
already applied are skipped.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return 2
	}
	// A request for help prints the usage and starts nothing: no configuration is read, no
	// database or port is touched.
	if text, ok := helpFor(args); ok {
		_, _ = fmt.Fprint(stdout, text)
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
		// Say which signal began the stop; each part then logs what it finished.
		go func() {
			<-ctx.Done()
			// A signal's cause says which; the deferred stop's is plain context.Canceled.
			if cause := context.Cause(ctx); cause != nil && cause.Error() != context.Canceled.Error() {
				logger.Info("signal received: stopping", "command", cmd, "signal", cause.Error())
			}
		}()
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

// isHelp reports whether arg asks for help: -h, -help, --help, or the word help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// helpFor returns the usage args ask for: help as the command (cohort help, cohort --help), or a
// help flag or the word help after a known command or tenants command (cohort dev --help, cohort
// tenants help, cohort tenants create --help). An unknown command is not help: it stays an error.
func helpFor(args []string) (string, bool) {
	if isHelp(args[0]) {
		return usage, true
	}
	cmd, rest := args[0], args[1:]
	asked := false
	for _, a := range rest {
		if a == "--" {
			break
		}
		asked = asked || isHelp(a)
	}
	if !asked {
		return "", false
	}
	switch cmd {
	case "dev":
		return devUsage, true
	case "serve":
		return serveUsage, true
	case "worker":
		return workerUsage, true
	case "migrate":
		return migrateUsage, true
	case "secret-key":
		return secretKeyUsage, true
	case "tenants":
		if len(rest) > 0 {
			if text, ok := tenantCommandUsage(rest[0]); ok {
				return text, true
			}
		}
		return tenantsUsage, true
	}
	return "", false
}

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
