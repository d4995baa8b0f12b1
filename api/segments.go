package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/segment/export"
)

// SegmentJobs starts segment workflows (workflows.SegmentJobs in production).
type SegmentJobs interface {
	Compute(ctx context.Context, tenantID, segmentID int64) (string, error)
	Recompute(ctx context.Context, tenantID, segmentID int64) (string, error)
	Export(ctx context.Context, tenantID, segmentID, exportID int64) error
	Draft(ctx context.Context, tenantID, segmentID int64) (*segment.Segment, error)
	SetRefresh(ctx context.Context, tenantID, segmentID int64, every time.Duration) error
}

// SegmentsDeps are the segment endpoints' dependencies.
type SegmentsDeps struct {
	Service *segment.Service
	Cache   *segment.MembershipCache
	Jobs    SegmentJobs
	Runner  segment.Runner // nil: the embedded Postgres warehouse
	Blob    blob.Store
}

const maxDefinitionBody = 256 << 10

func (s *Server) segmentRoutes(a *gin.RouterGroup) {
	g := a.Group("/segments")
	bearer := s.require(policyBearer)
	g.GET("/", bearer, s.listSegments)
	g.POST("/", bearer, s.createSegment)
	g.POST("/preview/", bearer, s.previewSegment)
	s.setBodyLimit(http.MethodPost, "/api/segments/preview/", maxDefinitionBody)
	g.GET("/membership/", s.require(policySecretKey), s.segmentMembership)
	g.GET("/exports/:export_id/download/", bearer, s.downloadSegmentExport)
	g.GET("/:id/", bearer, s.getSegment)
	g.PATCH("/:id/", bearer, s.patchSegment)
	s.setBodyLimit(http.MethodPatch, "/api/segments/:id/", maxDefinitionBody)
	g.DELETE("/:id/", bearer, s.deleteSegment)
	g.POST("/:id/compute/", bearer, s.computeSegment)
	g.GET("/:id/members/", bearer, s.segmentMembers)
	g.POST("/:id/export/", bearer, s.startSegmentExport)
	g.GET("/:id/export/", bearer, s.segmentExportStatus)
	g.GET("/:id/versions/", bearer, s.segmentVersions)
	g.POST("/:id/draft/", bearer, s.draftSegment)
}

// pathID reads a positive integer path parameter; anything else is a 404 (no such resource).
func pathID(c *gin.Context, name string) (int64, bool) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		abort(c, codedNotFound("no "+strings.TrimSuffix(name, "_id")+" "+strconv.Quote(c.Param(name))))
		return 0, false
	}
	return id, true
}

func (s *Server) listSegments(c *gin.Context) {
	out, err := s.d.Segments.Service.List(c.Request.Context(), mustCredential(c).TenantID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) createSegment(c *gin.Context) {
	var in segment.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	seg, err := s.d.Segments.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, seg)
}

func (s *Server) getSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	seg, err := s.d.Segments.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, seg)
}

func (s *Server) patchSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in segment.UpdateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	tenant := mustCredential(c).TenantID
	res, err := s.d.Segments.Service.Update(ctx, tenant, id, in)
	if err != nil {
		abort(c, err)
		return
	}
	if res.RefreshChanged {
		every := time.Duration(0)
		if res.Segment.RefreshEverySecs != nil {
			every = time.Duration(*res.Segment.RefreshEverySecs) * time.Second
		}
		if err := s.d.Segments.Jobs.SetRefresh(ctx, tenant, id, every); err != nil {
			abort(c, err)
			return
		}
	}
	// A new definition recomputes automatically (ai drafts wait for an explicit compute).
	if res.DefinitionChanged {
		if res.Segment, _, err = s.queueCompute(ctx, tenant, id, s.d.Segments.Jobs.Recompute); err != nil {
			abort(c, err)
			return
		}
	}
	c.JSON(http.StatusOK, res.Segment)
}

func (s *Server) deleteSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	tenant := mustCredential(c).TenantID
	seg, err := s.d.Segments.Service.Get(ctx, tenant, id)
	if err != nil {
		abort(c, err)
		return
	}
	if seg.RefreshEverySecs != nil {
		if err := s.d.Segments.Jobs.SetRefresh(ctx, tenant, id, 0); err != nil {
			abort(c, err)
			return
		}
	}
	if err := s.d.Segments.Service.Delete(ctx, tenant, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

type previewRequest struct {
	Definition json.RawMessage `json:"definition"`
	Limit      *int            `json:"limit"`
}

func (s *Server) previewSegment(c *gin.Context) {
	var in previewRequest
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	limit := segment.DefaultPreviewLimit
	if in.Limit != nil {
		if *in.Limit < 0 || *in.Limit > segment.MaxPreviewLimit {
			abort(c, errs.Invalid("limit", "must be an integer from 0 to 100"))
			return
		}
		limit = *in.Limit
	}
	out, err := s.d.Segments.Service.Preview(c.Request.Context(), mustCredential(c).TenantID, in.Definition, limit, s.d.Segments.Runner)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

type computeResponse struct {
	Status     string `json:"status"`
	SegmentID  int64  `json:"segment_id"`
	WorkflowID string `json:"workflow_id"`
}

func (s *Server) computeSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	_, wf, err := s.queueCompute(c.Request.Context(), mustCredential(c).TenantID, id, s.d.Segments.Jobs.Compute)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, computeResponse{Status: segment.StatusQueued, SegmentID: id, WorkflowID: wf})
}

// queueCompute marks the segment queued and signals its compute workflow with start (Jobs.Compute
// or Jobs.Recompute). When Temporal cannot be reached the segment shows the failure in last_error
// instead of staying queued.
func (s *Server) queueCompute(ctx context.Context, tenant, id int64, start func(context.Context, int64, int64) (string, error)) (*segment.Segment, string, error) {
	seg, err := s.d.Segments.Service.MarkQueued(ctx, tenant, id)
	if err != nil {
		return nil, "", err
	}
	wf, err := start(ctx, tenant, id)
	if err != nil {
		_ = s.d.Segments.Service.MarkError(ctx, tenant, id, "could not start the compute: the workflow service is unavailable")
		return nil, "", err
	}
	return seg, wf, nil
}

type membershipResponse struct {
	UserID     string  `json:"user_id"`
	SegmentIDs []int64 `json:"segment_ids"`
	Cached     bool    `json:"cached"`
}

func (s *Server) segmentMembership(c *gin.Context) {
	// Any user id ingestion accepts can be looked up.
	user := c.Query("user_id")
	if user == "" || utf8.RuneCountInString(user) > ingest.MaxUserIDLen {
		abort(c, errs.Invalid("user_id", fmt.Sprintf("is required, at most %d characters", ingest.MaxUserIDLen)))
		return
	}
	ids, cached, err := s.d.Segments.Cache.Lookup(c.Request.Context(), mustCredential(c).TenantID, user)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, membershipResponse{UserID: user, SegmentIDs: ids, Cached: cached})
}

func (s *Server) segmentMembers(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	limit, err := queryInt(c, "limit", segment.DefaultMembersLimit, 1, segment.MaxMembersLimit)
	if err != nil {
		abort(c, err)
		return
	}
	page, err := s.d.Segments.Service.Members(c.Request.Context(), mustCredential(c).TenantID, id, int(limit), c.Query("cursor"))
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, page)
}

func (s *Server) segmentVersions(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Segments.Service.Versions(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) startSegmentExport(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in segment.ExportInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	tenant := mustCredential(c).TenantID
	e, err := s.d.Segments.Service.CreateExport(ctx, tenant, id, in)
	if err != nil {
		abort(c, err)
		return
	}
	if err := s.d.Segments.Jobs.Export(ctx, tenant, id, e.ID); err != nil {
		_ = s.d.Segments.Service.FailExport(ctx, tenant, e.ID, "could not start the export: the workflow service is unavailable")
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, e)
}

func (s *Server) segmentExportStatus(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	raw := c.Query("export_id")
	exportID, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || exportID <= 0 {
		abort(c, errs.Invalid("export_id", "is required: the export_id the export request returned"))
		return
	}
	ctx := c.Request.Context()
	e, err := s.d.Segments.Service.GetExport(ctx, mustCredential(c).TenantID, id, exportID)
	if err != nil {
		abort(c, err)
		return
	}
	now := s.d.Now()
	if e.Status == "ready" && e.BlobKey != nil && !e.Expired(now) {
		ttl := min(e.ExpiresAt.Sub(now), segment.ExportTTL)
		url, err := s.d.Segments.Blob.SignedURL(ctx, *e.BlobKey, ttl)
		if err != nil {
			abort(c, err)
			return
		}
		e.DownloadURL = &url
	}
	c.JSON(http.StatusOK, e)
}

func (s *Server) downloadSegmentExport(c *gin.Context) {
	id, ok := pathID(c, "export_id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	e, err := s.d.Segments.Service.GetExport(ctx, mustCredential(c).TenantID, 0, id)
	if err != nil {
		abort(c, err)
		return
	}
	switch {
	case e.Status != "ready" || e.BlobKey == nil:
		abort(c, errs.Coded(errs.ErrConflict, "export_not_ready", "export %d is %s; download it once its status is ready", e.ID, e.Status))
		return
	case e.Expired(s.d.Now()):
		abort(c, errs.Coded(errs.ErrNotFound, "export_expired", "export %d expired at %s; start a new export", e.ID, e.ExpiresAt.Format(time.RFC3339)))
		return
	}
	rc, err := s.d.Segments.Blob.Open(ctx, *e.BlobKey)
	if err != nil {
		abort(c, err)
		return
	}
	defer func() { _ = rc.Close() }()
	f := export.Format(e.Format)
	c.Header("Content-Disposition", `attachment; filename="segment-`+strconv.FormatInt(e.SegmentID, 10)+`-export-`+strconv.FormatInt(e.ID, 10)+f.Ext()+`"`)
	c.Header("Content-Type", f.ContentType())
	c.Status(http.StatusOK)
	_, _ = io.Copy(c.Writer, rc)
}

func (s *Server) draftSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	tenant := mustCredential(c).TenantID
	seg, err := s.d.Segments.Service.Get(ctx, tenant, id)
	if err != nil {
		abort(c, err)
		return
	}
	if seg.SegmentType != segment.KindAI {
		abort(c, errs.Coded(errs.ErrInvalid, "not_ai_segment", "only segments of type ai are drafted from their description"))
		return
	}
	if strings.TrimSpace(seg.Description) == "" {
		abort(c, errs.Coded(errs.ErrInvalid, "no_description", "the segment has no description to draft from; PATCH one first"))
		return
	}
	out, err := s.d.Segments.Jobs.Draft(ctx, tenant, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}
