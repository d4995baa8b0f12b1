// Package api is Cohort's HTTP interface: the Gin router, its middleware (tracing, request ids,
// logs, metrics, panics, body limits, CORS, authentication) and one file per resource group.
// Handlers are thin: bind, validate, one call to a service (a service starts the workflows; api
// does not import Temporal), map the error (errors.go), render. The contract is openapi.yaml,
// served at /openapi.yaml and checked against the routes by TestOpenAPIContract.
package api

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/metrics"
)

//go:embed openapi.yaml
var openAPISpec []byte

// OpenAPISpec returns the contract served at /openapi.yaml.
func OpenAPISpec() []byte { return openAPISpec }

// ReadyCheck is one dependency /readyz checks.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Deps are everything the handlers call.
type Deps struct {
	Logger *slog.Logger
	Auth   *auth.Authenticator
	// LocalBlob serves signed downloads in the embedded mode; nil when blobs live in GCS.
	LocalBlob *blob.Local
	Ready     []ReadyCheck
	// Ingest serves /api/ingestion/; its routes are registered only when set.
	Ingest *IngestionDeps
	// Profiles serves GET /api/profiles/{id}/; registered only when set.
	Profiles *ProfilesDeps
	// Segments serves /api/segments/; its routes are registered only when set.
	Segments *SegmentsDeps
	// Activations serves /api/activations/; its routes are registered only when set.
	Activations *ActivationsDeps
	// Catalog serves /api/pim/; its routes are registered only when set.
	Catalog *CatalogDeps
	// ProductSegments serves /api/product-segments/; its routes are registered only when set.
	ProductSegments *ProductSegmentsDeps
	// Pages serves /api/ai-pages/ (AIQueries, pages, versions, bulk jobs, public reads); its
	// routes are registered only when set.
	Pages *PagesDeps
	// Search serves GET /api/ai-pages/query; its route is registered only when set.
	Search *SearchDeps
	// Design serves /api/ai-pages/design-system/ (and its extract stream); registered only when set.
	Design *DesignDeps
	// Templates serves /api/ai-pages/templates/; registered only when set.
	Templates *TemplatesDeps
	// Feeds serves /api/ai-pages/feeds/; registered only when set.
	Feeds *FeedsDeps
	// Exports serves /api/ai-pages/pages/<id>/export/; registered only when set.
	Exports *ExportsDeps
	// SDK is the client library's browser bundle, served at /sdk/v1/cohort.min.js (sdk.go); the
	// routes are registered only when set.
	SDK *SDKBundle
	// Origins gives a tenant's allowed browser origins (CORS, cors.go); nil: any origin.
	Origins OriginStore
	// Registry collects Prometheus metrics; a new one when nil.
	Registry *prometheus.Registry
	// ServeMetrics serves the registry at /metrics on this router: only cohort dev without
	// COHORT_METRICS_ADDR (and tests) do; serve leaves /metrics to the metrics listener.
	ServeMetrics bool
	// Spend limits and meters the endpoints that spend model tokens (usage.go) and serves
	// GET /api/usage/; nil: no limit, and the usage route is not registered.
	Spend *aispend.Service
	// Metrics records searches and public page reads (nil: not recorded).
	Metrics      *metrics.Metrics
	MaxBodyBytes int64
	Now          func() time.Time
}

// Server is the HTTP API.
type Server struct {
	d          Deps
	engine     *gin.Engine
	bodyLimits map[string]int64 // "METHOD /route/template" -> bytes, beyond the default
	metrics    *httpMetrics
	origins    originCache
	sdk        *sdkAsset
}

// New builds the router: the health, contract, auth, blob download and block registry routes
// always, /metrics with ServeMetrics, and each resource group's routes when its Deps field is set.
func New(d Deps) *Server {
	if d.Registry == nil {
		d.Registry = metrics.NewRegistry()
	}
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = 1 << 20
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	s := &Server{d: d, engine: e, bodyLimits: map[string]int64{}, metrics: newHTTPMetrics(d.Registry), sdk: newSDKAsset(d.SDK)}
	e.Use(s.tracing) // a server span per request (tracing.go), around everything below
	// observe wraps recover so a panic still counts as a 500 in metrics and the access log.
	e.Use(s.requestID, s.observe, s.recover, s.limitBody)
	// CORS for the browser-callable endpoints only (cors.go); a global middleware so that it also
	// answers preflights, which gin routes to NoMethod/NoRoute.
	e.Use(s.cors)
	e.NoRoute(func(c *gin.Context) {
		abort(c, codedNotFound("no route "+c.Request.Method+" "+c.Request.URL.Path))
	})
	e.NoMethod(func(c *gin.Context) {
		method := c.Request.Method
		if isHead(c.Request) {
			method = http.MethodHead
		}
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, ErrorBody{Error: ErrorDetail{
			Code: "method_not_allowed", Message: method + " is not allowed on " + c.Request.URL.Path,
			RequestID: c.GetString(ctxRequestID),
		}})
	})
	s.routes()
	return s
}

// Handler is the http.Handler to serve: the router behind edge (middleware.go), which gives
// every answer its request id and nosniff and serves HEAD wherever GET is served.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.edge) }

// Routes lists the registered routes (method and template), for the contract test.
func (s *Server) Routes() gin.RoutesInfo { return s.engine.Routes() }

func (s *Server) routes() {
	e := s.engine
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if s.d.ServeMetrics {
		e.GET("/metrics", s.metricsHandler())
	}
	e.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", openAPISpec) })
	// Browsers ask every origin they show a page of (the hosted pages under /p/) for its icon;
	// "no content" instead of a 404 that each visit would log as a console error.
	e.GET("/favicon.ico", func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=86400")
		c.Status(http.StatusNoContent)
	})
	if s.sdk != nil {
		s.sdkRoutes(e)
	}

	a := e.Group("/api")
	a.POST("/auth/session/", s.require(policyHandshake), s.startSession)
	a.GET("/auth/whoami/", s.require(policyAnyCaller), s.whoami)
	a.GET("/blobs/*key", s.downloadBlob)
	if s.d.Ingest != nil {
		s.ingestionRoutes(a)
		if s.d.Ingest.Segment != nil {
			s.segmentAPIRoutes(e, s.d.Ingest.Segment)
		}
	}
	if s.d.Segments != nil {
		s.segmentRoutes(a)
	}
	if s.d.Profiles != nil {
		s.profileRoutes(a)
	}
	if s.d.Activations != nil {
		s.activationRoutes(a)
	}
	if s.d.Catalog != nil {
		s.catalogRoutes(a)
	}
	if s.d.ProductSegments != nil {
		s.productSegmentRoutes(a)
	}
	if s.d.Search != nil {
		s.searchRoutes(a)
	}
	if s.d.Pages != nil {
		s.pageRoutes(a)
		if s.d.Pages.Hosted != nil {
			s.hostedRoutes(e)
		}
	}
	if s.d.Spend != nil {
		s.usageRoutes(a)
	}
	if s.d.Design != nil {
		s.designRoutes(a)
	}
	if s.d.Templates != nil {
		s.templateRoutes(a)
	}
	if s.d.Feeds != nil {
		s.feedRoutes(a)
	}
	if s.d.Exports != nil {
		s.exportRoutes(a)
	}
	a.GET("/ai-pages/blocks/", s.require(policyPages), s.listBlocks)
}
