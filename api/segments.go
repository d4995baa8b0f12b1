package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/segment/export"
)

// SegmentsDeps are the segment endpoints' dependencies. The service starts the segment
// workflows (it is built with their starter).
type SegmentsDeps struct {
	Service *segment.Service
	Cache   *segment.MembershipCache
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
	g.POST("/:id/draft/", bearer, s.spend(ai.OpSegmentDraft), s.draftSegment)
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
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createSegment(c *gin.Context) {
	var in segment.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	seg, err := s.d.Segments.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, seg, err)
}

func (s *Server) getSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	seg, err := s.d.Segments.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, seg, err)
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
	// A new definition recomputes automatically (ai drafts wait for an explicit compute).
	seg, err := s.d.Segments.Service.Patch(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, seg, err)
}

func (s *Server) deleteSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.Segments.Service.Delete(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
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
		limit = *in.Limit // the service checks the range
	}
	out, err := s.d.Segments.Service.Preview(c.Request.Context(), mustCredential(c).TenantID, in.Definition, limit, s.d.Segments.Runner)
	reply(c, http.StatusOK, out, err)
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
	_, wf, err := s.d.Segments.Service.Compute(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, computeResponse{Status: segment.StatusQueued, SegmentID: id, WorkflowID: wf})
}

type membershipResponse struct {
	UserID string `json:"user_id"`
	// CanonicalUserID is the user the id asked is linked to, when it is not that user's own id.
	CanonicalUserID string  `json:"canonical_user_id,omitempty"`
	SegmentIDs      []int64 `json:"segment_ids"`
	Cached          bool    `json:"cached"`
}

func (s *Server) segmentMembership(c *gin.Context) {
	// The id is a user id or an anonymous id (either parameter name): it answers for its
	// canonical user. It is looked up when ingestion would accept it: the same rule.
	param := "user_id"
	user, byUser := c.GetQuery("user_id")
	if anon, byAnon := c.GetQuery("anonymous_id"); byAnon {
		if byUser {
			abort(c, &errs.ValidationError{Code: "invalid_user_id", Fields: map[string]string{
				"user_id": "give user_id or anonymous_id, not both", "anonymous_id": "give user_id or anonymous_id, not both"}})
			return
		}
		param, user = "anonymous_id", anon
	}
	if err := ident.CheckUserID(user); err != nil {
		abort(c, &errs.ValidationError{Code: "invalid_" + param, Fields: map[string]string{param: err.Error()}})
		return
	}
	m, cached, err := s.d.Segments.Cache.Lookup(c.Request.Context(), mustCredential(c).TenantID, user)
	if err != nil {
		abort(c, err)
		return
	}
	out := membershipResponse{UserID: user, SegmentIDs: m.SegmentIDs, Cached: cached}
	if m.UserID != user {
		out.CanonicalUserID = m.UserID
	}
	c.JSON(http.StatusOK, out)
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
	reply(c, http.StatusOK, page, err)
}

func (s *Server) segmentVersions(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Segments.Service.Versions(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
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
	e, err := s.d.Segments.Service.StartExport(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusAccepted, e, err)
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
	e, err := s.d.Segments.Service.ExportWithLink(c.Request.Context(), mustCredential(c).TenantID, id, exportID, s.d.Segments.Blob)
	reply(c, http.StatusOK, e, err)
}

func (s *Server) downloadSegmentExport(c *gin.Context) {
	id, ok := pathID(c, "export_id")
	if !ok {
		return
	}
	e, rc, err := s.d.Segments.Service.OpenExport(c.Request.Context(), mustCredential(c).TenantID, id, s.d.Segments.Blob)
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
	out, err := s.d.Segments.Service.Draft(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}
