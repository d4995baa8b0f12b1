package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/keycheck"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/metrics/temporalmetrics"
	"github.com/cohort-dev/cohort/internal/search"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/tclient"
	"github.com/cohort-dev/cohort/internal/tenant"
	"github.com/cohort-dev/cohort/schema"
	sdkjs "github.com/cohort-dev/cohort/sdk/js"
	"github.com/cohort-dev/cohort/worker"
	"github.com/cohort-dev/cohort/workflows"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// Purposes of keys derived from COHORT_SECRET_KEY; changing one invalidates what it protects.
const (
	purposeTokens    = "cohort/jwt/v1"
	purposeSecretBox = "cohort/secretbox/v1"
	purposeBlobURLs  = "cohort/blob-urls/v1"
)

// derivedKeys derives purpose's key from each of keys.
func derivedKeys(keys [][]byte, purpose string) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = secretbox.DeriveKey(k, purpose)
	}
	return out
}

// core is what every role needs: the metadata store, tenants and authentication.
type core struct {
	cfg       *config.Config
	log       *slog.Logger
	db        *store.DB
	box       *secretbox.Box
	signer    *auth.Signer
	tenants   *tenant.Service
	auth      *auth.Authenticator
	blob      blob.Store
	localBlob *blob.Local
	closers   []func()
	// reg is the process's one Prometheus registry: HTTP, pipeline and Temporal SDK metrics.
	reg          *prometheus.Registry
	metrics      *metrics.Metrics
	aiMetrics    *ai.Metrics // the AI provider's calls, shared by every provider the role builds
	metricsOnAPI bool        // serve /metrics on the API port (dev without a metrics listener)
	// spend limits and meters the tenants' model tokens (wire_aispend.go).
	spend *aispend.Service
	// stopPageCounts stops the page view counter's flusher after its final flush (wire_pages.go;
	// nil before pagesAPI). A closer too; dev calls it as soon as its HTTP server stopped.
	stopPageCounts func()
}

type coreOptions struct {
	migrate      bool // apply schema/ at start (embedded mode only)
	blob         bool // open the blob store
	metricsOnAPI bool // /metrics on the API port too
}

func openCore(ctx context.Context, cfg *config.Config, logger *slog.Logger, o coreOptions) (_ *core, err error) {
	c := &core{cfg: cfg, log: logger, reg: metrics.NewRegistry(), metricsOnAPI: o.metricsOnAPI}
	c.metrics = metrics.New(c.reg)
	c.aiMetrics = ai.NewMetrics(c.reg)
	defer func() {
		if err != nil {
			c.close() // whatever was opened before the failure
		}
	}()
	db, err := store.Open(ctx, cfg.DatabaseURL, store.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	c.db = db
	c.closers = append(c.closers, db.Close)
	if o.migrate {
		if err := migrate(ctx, db, logger); err != nil {
			return nil, err
		}
	}
	// Secrets are sealed with the current key; previous keys (during a rotation) still open
	// what they sealed and verify the tokens they signed.
	boxKey := secretbox.DeriveKey(cfg.SecretKey, purposeSecretBox)
	boxKeys := map[string][]byte{secretbox.KeyID(boxKey): boxKey}
	for _, k := range cfg.PreviousSecretKeys {
		prev := secretbox.DeriveKey(k, purposeSecretBox)
		boxKeys[secretbox.KeyID(prev)] = prev
	}
	c.box, err = secretbox.New(boxKeys, secretbox.KeyID(boxKey))
	if err != nil {
		return nil, err
	}
	c.signer, err = auth.NewSigner(secretbox.DeriveKey(cfg.SecretKey, purposeTokens), time.Now)
	if err != nil {
		return nil, err
	}
	if err := c.signer.AcceptPrevious(derivedKeys(cfg.PreviousSecretKeys, purposeTokens)...); err != nil {
		return nil, err
	}
	c.tenants = tenant.NewService(db.Gorm, c.box, time.Now)
	if c.spend, err = c.openSpend(); err != nil {
		return nil, err
	}
	// Tokens signed and secrets sealed under another key than the database was set up with would
	// be refused or unreadable later: every role stops here instead.
	pending, err := keycheck.CheckRotating(ctx, db.Gorm, cfg.SecretKey, cfg.PreviousSecretKeys, c.tenants, secretKeySource(cfg))
	if err != nil {
		return nil, err
	}
	if pending {
		logger.Warn("the database's secrets are still sealed with a previous secret key (COHORT_SECRET_KEY_PREVIOUS): run `cohort secret-key reseal`")
	}
	var jwks *auth.JWKSVerifier
	if cfg.JWT.JWKSURL != "" {
		jwks, err = auth.NewJWKSVerifier(auth.JWKSConfig{
			URL: cfg.JWT.JWKSURL, Issuer: cfg.JWT.Issuer, Audience: cfg.JWT.Audience, TenantClaim: cfg.JWT.TenantClaim,
		})
		if err != nil {
			return nil, err
		}
	}
	c.auth = auth.NewAuthenticator(auth.Deps{
		Keys: c.tenants, Tenants: c.tenants, Identity: c.tenants, Signer: c.signer, JWKS: jwks, Now: time.Now,
	})
	if o.blob {
		if err := c.openBlob(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *core) openBlob(ctx context.Context) error {
	switch c.cfg.Blob {
	case "local":
		l, err := blob.NewLocal(blob.LocalConfig{
			Dir:        filepath.Join(c.cfg.DataDir, "blobs"),
			BaseURL:    c.cfg.PublicBaseURL,
			SigningKey: secretbox.DeriveKey(c.cfg.SecretKey, purposeBlobURLs),
			// Links signed before a rotation of the secret key stay valid until they expire.
			PreviousSigningKeys: derivedKeys(c.cfg.PreviousSecretKeys, purposeBlobURLs),
			Now:                 time.Now,
		})
		if err != nil {
			return err
		}
		c.blob, c.localBlob = l, l
	case "gcs":
		g, err := blob.NewGCS(ctx, blob.GCSConfig{Bucket: c.cfg.GCSBucket, Now: time.Now})
		if err != nil {
			return err
		}
		c.blob = g
		c.closers = append(c.closers, func() { _ = g.Close() })
	default:
		return fmt.Errorf("unknown blob store %q", c.cfg.Blob)
	}
	return nil
}

func (c *core) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

func migrate(ctx context.Context, db *store.DB, logger *slog.Logger) error {
	ms, err := store.LoadMigrations(schema.Postgres, schema.PostgresDir)
	if err != nil {
		return err
	}
	applied, err := store.Migrate(ctx, db.Pool, ms)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		logger.Info("applied migrations", "versions", applied)
	}
	return nil
}

// apiDeps builds the HTTP API's dependencies from the core.
func (c *core) apiDeps(ready []api.ReadyCheck, in *ingestion, seg *api.SegmentsDeps, act *api.ActivationsDeps) api.Deps {
	return api.Deps{
		Ingest:       c.ingestAPI(in),
		Segments:     seg,
		Profiles:     &api.ProfilesDeps{Reader: identity.NewProfiles(c.db.Pool)},
		Activations:  act,
		Logger:       c.log,
		Auth:         c.auth,
		Origins:      c.tenants,
		Registry:     c.reg,
		Metrics:      c.metrics,
		Spend:        c.spend,
		ServeMetrics: c.metricsOnAPI,
		SDK:          &api.SDKBundle{Version: sdkjs.Version(), Script: sdkjs.Bundle()},
		LocalBlob:    c.localBlob,
		Ready:        append([]api.ReadyCheck{{Name: "postgres", Check: c.db.Ping}}, ready...),
		MaxBodyBytes: c.cfg.MaxBodyBytes,
		Now:          time.Now,
	}
}

// newAPI is the HTTP API of serve and dev: Temporal joins the readiness checks, and the segment
// membership cache runs until ctx ends. cat is the role's catalogue (openCatalog), st its one
// workflow starter (starter).
func (c *core) newAPI(ctx context.Context, in *ingestion, segs *segments, cat *catalogParts, st *workflows.Starter, srch *search.Service) *api.Server {
	// Without Cohort's search attributes every workflow start fails: say so at start, and keep
	// /readyz unavailable (with the command that fixes it) until they exist.
	attrs := tclient.NewSearchAttributes(st.Client, c.cfg.Temporal.Namespace, c.log)
	attrs.Startup(ctx)
	ready := []api.ReadyCheck{
		{Name: "temporal", Check: func(ctx context.Context) error { return tclient.Check(ctx, st.Client) }},
		{Name: "temporal_search_attributes", Check: attrs.Check},
	}
	d := c.apiDeps(ready, in, c.segmentsAPI(ctx, segs, st), c.activationsAPI(st))
	d.Catalog = c.catalogAPI(cat)
	d.ProductSegments = c.productSegmentsAPI(cat)
	d.Pages = c.withBuilder(c.pagesAPI(st), srch)
	d.Search = &api.SearchDeps{Service: srch}
	c.designAPI(&d)
	c.feedsAPI(&d, st)
	c.exportsAPI(&d, st)
	return api.New(d)
}

// serveHTTP listens on addr and serves h until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, grace time.Duration) (net.Addr, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// In-flight requests, counted so that the drain can say what it finished.
	var inFlight atomic.Int64
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
	done := make(chan error, 1)
	go func() {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			done <- err
			return
		case <-ctx.Done():
		}
		start, draining := time.Now(), inFlight.Load()
		logger.Info("HTTP server draining: no new requests, in-flight ones finish", "addr", ln.Addr().String(),
			"in_flight", draining, "timeout", grace.String())
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		err := srv.Shutdown(sctx)
		left := inFlight.Load()
		if err != nil {
			_ = srv.Close() // past the grace period: cut what is left
		}
		if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		level := slog.LevelInfo
		if left > 0 {
			level = slog.LevelWarn
		}
		logger.Log(context.Background(), level, "HTTP server stopped", "addr", ln.Addr().String(),
			"took", time.Since(start).Round(time.Millisecond).String(), "finished", max(draining-left, 0), "cut_off", left)
		done <- err
	}()
	return ln.Addr(), done, nil
}

// temporalMetrics is the Temporal SDK's metrics handler on the process's registry (tclient.Dial).
func (c *core) temporalMetrics() client.MetricsHandler {
	return temporalmetrics.New(c.reg, temporalmetrics.Options{TaskQueues: []string{c.cfg.Temporal.TaskQueue}})
}

// serveMetrics starts the metrics listener of role (config.MetricsListen; none: nothing to do):
// /metrics and /healthz until ctx ends. A listener that fails later is logged: metrics are not
// worth stopping the role for.
func (c *core) serveMetrics(ctx context.Context, role config.Role) error {
	addr := c.cfg.MetricsListen(role)
	if addr == "" {
		return nil
	}
	bound, done, err := serveHTTP(ctx, addr, metrics.Mux(c.reg, api.Version), c.log, 5*time.Second)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	c.log.Info("serving metrics", "addr", bound.String())
	go func() {
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error("metrics listener stopped", "error", err)
		}
	}()
	return nil
}

// starter is the role's one workflow starter over tc: every service that starts a workflow
// gets it (a role builds it once, after dialing Temporal).
func (c *core) starter(tc client.Client) *workflows.Starter {
	return &workflows.Starter{Client: tc, TaskQueue: c.cfg.Temporal.TaskQueue, Names: workflows.NamesFrom(c.db.Pool)}
}

// workerDeps builds the worker role's registrations and consumers: every workflow of
// workflows.All (worker.Workflows), then the capabilities' activities.
func (c *core) workerDeps(tc client.Client, regs []worker.Registration, consumers ...worker.Consumer) worker.Deps {
	return worker.Deps{
		Temporal:      tc,
		TaskQueue:     c.cfg.Temporal.TaskQueue,
		Logger:        c.log,
		Registrations: append([]worker.Registration{worker.Workflows}, regs...),
		Consumers:     consumers,
		StopTimeout:   c.cfg.WorkerStopTimeout,
	}
}
