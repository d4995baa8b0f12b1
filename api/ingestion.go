package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
)

// IngestionDeps are the ingestion endpoints' dependencies.
type IngestionDeps struct {
	Service *ingest.Service
	Stats   *load.Stats
	// Health checks of GET /api/ingestion/health/: pubsub_topic, worker and the warehouse's name.
	Health []ReadyCheck
	// Shopify verifies and maps storefront webhooks.
	Shopify *ingest.ShopifyReceiver
}

func (s *Server) ingestionRoutes(a *gin.RouterGroup) {
	in := a.Group("/ingestion")
	in.POST("/track/", s.require(policyIngest), s.track)
	in.POST("/track/batch/", s.require(policyIngest), s.trackBatch)
	s.setBodyLimit(http.MethodPost, "/api/ingestion/track/batch/", ingest.MaxBatchBytes)
	in.POST("/shopify/:tenant_slug/", s.shopifyWebhook)
	s.setBodyLimit(http.MethodPost, "/api/ingestion/shopify/:tenant_slug/", 5<<20)
	in.GET("/health/", s.ingestionHealth)
	in.GET("/stats/", s.require(policyBearer), s.ingestionStats)
	in.GET("/errors/", s.require(policyBearer), s.ingestionErrors)
}

func caller(c *gin.Context) ingest.Caller {
	cred := mustCredential(c)
	ic := ingest.Caller{TenantID: cred.TenantID}
	if cred.Kind == auth.KindSession && cred.Verified {
		ic.BoundUser = cred.UserID
	}
	return ic
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads the (possibly gzip-encoded) body, capping the decoded size at limit.
func readBody(c *gin.Context, limit int64, fn func([]byte) error) error {
	var r io.Reader = c.Request.Body
	switch enc := strings.ToLower(strings.TrimSpace(c.GetHeader("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(c.Request.Body)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return err
			}
			return &errs.ValidationError{Code: "invalid_encoding", Msg: "body is not valid gzip"}
		}
		defer func() { _ = zr.Close() }()
		r = io.LimitReader(zr, limit+1)
	default:
		return errs.Coded(errs.ErrInvalid, "unsupported_encoding", "Content-Encoding %q is not supported; use gzip or none", enc)
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyPool.Put(buf)
	if _, err := buf.ReadFrom(r); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return &errs.ValidationError{Code: "invalid_encoding", Msg: "could not read the body: " + err.Error()}
	}
	if int64(buf.Len()) > limit {
		return &http.MaxBytesError{Limit: limit}
	}
	return fn(buf.Bytes())
}

// track: POST /api/ingestion/track/ accepts one event -> 202 {queued: true}.
func (s *Server) track(c *gin.Context) {
	err := readBody(c, ingest.MaxEventBytes, func(body []byte) error {
		return s.d.Ingest.Service.Track(c.Request.Context(), caller(c), body)
	})
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = errs.Coded(errs.ErrTooLarge, "event_too_large", "an event is at most %d bytes", ingest.MaxEventBytes)
		}
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"queued": true})
}

// trackBatch: POST /api/ingestion/track/batch/ -> 202 {queued, skipped, errors}.
func (s *Server) trackBatch(c *gin.Context) {
	var res ingest.BatchResult
	err := readBody(c, ingest.MaxBatchBytes, func(body []byte) error {
		var err error
		res, err = s.d.Ingest.Service.TrackBatch(c.Request.Context(), caller(c), body)
		return err
	})
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, res)
}

// ingestionHealth: GET /api/ingestion/health/ (no auth) -> {pubsub_topic, worker, <warehouse>}.
func (s *Server) ingestionHealth(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, chk := range s.d.Ingest.Health {
		wg.Go(func() {
			v := "ok"
			if err := chk.Check(ctx); err != nil {
				v = err.Error()
				if len(v) > 200 {
					v = v[:200]
				}
			}
			mu.Lock()
			out[chk.Name] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	status := http.StatusOK
	for _, v := range out {
		if v != "ok" {
			status = http.StatusServiceUnavailable
		}
	}
	c.JSON(status, out)
}

// ingestionStats: GET /api/ingestion/stats/?window=24h|7d.
func (s *Server) ingestionStats(c *gin.Context) {
	res, err := s.d.Ingest.Stats.Get(c.Request.Context(), mustCredential(c).TenantID, c.Query("window"))
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// ingestionErrors: GET /api/ingestion/errors/?limit= (default 50, at most 100), newest first.
func (s *Server) ingestionErrors(c *gin.Context) {
	limit := 50
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			abort(c, errs.Invalid("limit", "must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	recs, err := s.d.Ingest.Service.ErrorLog().List(c.Request.Context(), mustCredential(c).TenantID, limit)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, recs)
}

// shopifyWebhook: POST /api/ingestion/shopify/<tenant_slug>/, authenticated only by
// X-Shopify-Hmac-SHA256 over the raw body. Unknown topics are acknowledged and ignored.
func (s *Server) shopifyWebhook(c *gin.Context) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		abort(c, err)
		return
	}
	n, err := s.d.Ingest.Shopify.Receive(c.Request.Context(), ingest.ShopifyDelivery{
		TenantSlug: c.Param("tenant_slug"),
		Topic:      c.GetHeader("X-Shopify-Topic"),
		WebhookID:  c.GetHeader("X-Shopify-Webhook-Id"),
		HMAC:       c.GetHeader("X-Shopify-Hmac-SHA256"),
		Body:       body,
	})
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"queued": n})
}
