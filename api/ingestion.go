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
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
)

// IngestionDeps are the ingestion endpoints' dependencies.
type IngestionDeps struct {
	Service *ingest.Service
	Stats   *load.Stats
	// Health checks of GET /api/ingestion/health/: pubsub_topic, worker and the warehouse's name.
	Health []ReadyCheck
	// Shopify verifies and maps storefront webhooks.
	Shopify *ingest.ShopifyReceiver
	// Segment maps Segment's HTTP tracking API (/v1/...) onto Service; nil: no /v1 routes.
	Segment *segmentcompat.Service
}

func (s *Server) ingestionRoutes(a *gin.RouterGroup) {
	in := a.Group("/ingestion")
	in.POST("/track/", s.require(policyIngest), s.track)
	in.POST("/track/batch/", s.requireOrBeacon(policyIngest), s.trackBatch)
	s.setBodyLimit(http.MethodPost, "/api/ingestion/track/batch/", ingest.MaxBatchBytes)
	in.POST("/shopify/:tenant_slug/", s.shopifyWebhook)
	s.setBodyLimit(http.MethodPost, "/api/ingestion/shopify/:tenant_slug/", 5<<20)
	in.GET("/health/", s.ingestionHealth)
	in.GET("/stats/", s.require(policyBearer), s.ingestionStats)
	in.GET("/errors/", s.require(policyBearer), s.ingestionErrors)
}

func caller(c *gin.Context) ingest.Caller {
	cred := mustCredential(c)
	ic := ingest.Caller{TenantID: cred.TenantID, Browser: cred.Kind == auth.KindSession}
	if cred.Kind == auth.KindSession && cred.Verified {
		ic.BoundUser = cred.UserID
	}
	if cred.Kind == auth.KindSession {
		ic.BoundAnonymous = cred.BoundAnonymousID
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

// trackBatch: POST /api/ingestion/track/batch/ -> 202 {queued, skipped, errors}. A request without
// an Authorization header (navigator.sendBeacon cannot set one) authenticates with the
// session_token field of its body; with a header, the header's credential is the one used.
func (s *Server) trackBatch(c *gin.Context) {
	var res ingest.BatchResult
	err := readBody(c, ingest.MaxBatchBytes, func(body []byte) error {
		token, found := wire.TakeSessionToken(body)
		if _, ok := credential(c); !ok {
			if !found {
				var ok bool
				if token, found, ok = wire.SessionTokenOf(body); !ok || !found {
					return errNoBeaconCredentials
				}
			}
			if err := s.beaconCredential(c, token); err != nil {
				return err
			}
		}
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
	reply(c, http.StatusOK, res, err)
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
	reply(c, http.StatusOK, recs, err)
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

// beaconTokenField is the batch body's field that carries a session token for beacon requests.
const beaconTokenField = wire.SessionTokenField

var errNoBeaconCredentials = errs.Coded(errs.ErrUnauthenticated, "unauthenticated",
	"no credentials: send Authorization: ApiKey <key> or Bearer <token>, or a session token in the body's %s field", beaconTokenField)

// requireOrBeacon is require(p), except that a request without an Authorization header goes on to
// the handler, which authenticates the session token of its body (trackBatch).
func (s *Server) requireOrBeacon(p policy) gin.HandlerFunc {
	req := s.require(p)
	return func(c *gin.Context) {
		if strings.TrimSpace(c.GetHeader("Authorization")) == "" {
			c.Next()
			return
		}
		req(c)
	}
}

// beaconCredential authenticates a body's session token with the same authenticator as the
// Authorization header. Only session tokens are accepted there: an API key in a body is refused
// without being looked up (a secret key in page source is exposed to every visitor).
func (s *Server) beaconCredential(c *gin.Context, token string) error {
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		return errs.Coded(errs.ErrUnauthenticated, "unauthenticated", "%s is empty: send a session token from POST /api/auth/session/", beaconTokenField)
	case strings.HasPrefix(token, "sk_"), strings.HasPrefix(token, "pk_"):
		if strings.HasPrefix(token, "sk_") {
			c.Set(ctxSecretInBody, true)
		}
		return errs.Coded(errs.ErrUnauthenticated, "unauthenticated",
			"%s accepts a session token from POST /api/auth/session/, not an API key; never put a secret key in a web page", beaconTokenField)
	}
	cred, err := s.d.Auth.Authenticate(c.Request.Context(), "Bearer "+token, "", false)
	if err != nil {
		return err
	}
	c.Set(ctxPresented, cred)
	if cred.Kind != auth.KindSession {
		return errs.Coded(errs.ErrUnauthenticated, "unauthenticated", "%s accepts a session token from POST /api/auth/session/, not a %s", beaconTokenField, cred.Kind)
	}
	c.Set(ctxCred, cred)
	return nil
}
