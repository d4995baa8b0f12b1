package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
)

// segmentAPIRoutes registers Segment's HTTP tracking API at the root (/v1/...), so Segment SDKs
// send to Cohort by changing their host; the write key is the tenant's sk_ key. svc is built in
// wiring (IngestionDeps.Segment).
func (s *Server) segmentAPIRoutes(e *gin.Engine, svc *segmentcompat.Service) {
	v1 := e.Group("/v1", s.requireSegmentKey)
	v1.POST("/batch", func(c *gin.Context) { s.segmentBatch(c, svc) })
	s.setBodyLimit(http.MethodPost, "/v1/batch", ingest.MaxBatchBytes)
	for _, typ := range []string{segmentcompat.TypeTrack, segmentcompat.TypeIdentify, segmentcompat.TypePage,
		segmentcompat.TypeScreen, segmentcompat.TypeGroup, segmentcompat.TypeAlias} {
		v1.POST("/"+typ, func(c *gin.Context) { s.segmentOne(c, svc, typ) })
	}
}

// requireSegmentKey authenticates Segment's way: HTTP Basic with the write key (an sk_ key) as
// the username and an empty password; Authorization: ApiKey sk_... is accepted too. No or an
// invalid credential is a 401; any credential other than a secret key is a 403.
func (s *Server) requireSegmentKey(c *gin.Context) {
	header := strings.TrimSpace(c.GetHeader("Authorization"))
	if scheme, value, ok := strings.Cut(header, " "); ok && strings.EqualFold(scheme, "Basic") {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		user, _, _ := strings.Cut(string(raw), ":")
		if err != nil || strings.TrimSpace(user) == "" {
			abort(c, errs.Coded(errs.ErrUnauthenticated, "unauthenticated", "malformed Basic credentials: send the write key (sk_...) as the username and an empty password"))
			return
		}
		header = "ApiKey " + strings.TrimSpace(user)
	}
	cred, err := s.d.Auth.Authenticate(c.Request.Context(), header, "", false)
	if err != nil {
		abort(c, err)
		return
	}
	if cred.Kind != auth.KindSecretKey {
		abort(c, errs.Coded(errs.ErrForbidden, "forbidden", "this endpoint accepts a secret key (sk_) as the write key, not a %s", cred.Kind.String()))
		return
	}
	c.Set(ctxCred, cred)
	c.Next()
}

// segmentBatch: POST /v1/batch -> 200 {success, accepted, skipped, errors}.
func (s *Server) segmentBatch(c *gin.Context, svc *segmentcompat.Service) {
	var res segmentcompat.Result
	err := readBody(c, ingest.MaxBatchBytes, func(body []byte) error {
		var err error
		res, err = svc.Batch(c.Request.Context(), mustCredential(c).TenantID, body)
		return err
	})
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// segmentOne: POST /v1/track, /v1/identify, /v1/page, /v1/screen, /v1/group, /v1/alias (one message) -> 200 {success, accepted: 1,
// skipped: 0, errors: []}; a rejected message is a 400 naming the field.
func (s *Server) segmentOne(c *gin.Context, svc *segmentcompat.Service, typ string) {
	var res segmentcompat.Result
	err := readBody(c, ingest.MaxEventBytes, func(body []byte) error {
		var err error
		res, err = svc.One(c.Request.Context(), mustCredential(c).TenantID, typ, body)
		return err
	})
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = errs.Coded(errs.ErrTooLarge, "event_too_large", "a message is at most %d bytes", ingest.MaxEventBytes)
		}
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}
