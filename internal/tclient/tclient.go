// Package tclient dials Temporal from the typed config: a Temporal cluster (optionally mTLS),
// Temporal Cloud (API key), or the embedded dev server.
package tclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/telemetry"
)

// Dial connects and verifies the connection (with retries for up to 30 s while a cluster starts).
// metrics receives the SDK's metrics (client and workers built on this client); nil: none.
func Dial(ctx context.Context, cfg config.TemporalConfig, logger *slog.Logger, metrics client.MetricsHandler) (client.Client, error) {
	// OpenTelemetry: spans for workflow starts, signals and queries on this client, and (workers
	// built on the client inherit its interceptors) for workflow and activity executions, with
	// the trace carried in Temporal's headers. Spans go to the global provider current when
	// each starts (no-op unless internal/telemetry set one up).
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            telemetry.Tracer("go.temporal.io/sdk"),
		TextMapPropagator: telemetry.Propagator(),
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	opts := client.Options{
		HostPort:       cfg.Address,
		Namespace:      cfg.Namespace,
		Logger:         tlog.NewStructuredLogger(logger.With("component", "temporal-client")),
		MetricsHandler: metrics,
		Interceptors:   []interceptor.ClientInterceptor{tracing},
	}
	if cfg.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.APIKey)
	}
	if cfg.TLS || cfg.TLSCertFile != "" || cfg.APIKey != "" {
		tc := &tls.Config{ServerName: cfg.TLSServerName, MinVersion: tls.VersionTLS12}
		if cfg.TLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("temporal tls key pair: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if cfg.TLSCAFile != "" {
			pem, err := os.ReadFile(cfg.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("temporal tls ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, errors.New("temporal tls ca: no certificates found")
			}
			tc.RootCAs = pool
		}
		opts.ConnectionOptions.TLS = tc
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to temporal at %s: %w", cfg.Address, err)
		}
		logger.Warn("temporal not reachable yet, retrying", "address", cfg.Address, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Check is a readiness probe.
func Check(ctx context.Context, c client.Client) error {
	_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
