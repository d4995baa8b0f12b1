package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ProductSegmentJobs starts product segment workflows (workflows.ProductSegmentJobs in
// production).
type ProductSegmentJobs interface {
	Compute(ctx context.Context, tenantID, segmentID int64) (string, error)
}

// ProductSegmentsDeps are the product segment endpoints' dependencies.
type ProductSegmentsDeps struct {
	Service *prodseg.Service
	Jobs    ProductSegmentJobs
}

const maxProductSegmentBody = 256 << 10

func (s *Server) productSegmentRoutes(a *gin.RouterGroup) {
	g := a.Group("/product-segments")
	auth := s.require(policyCatalog)
	g.GET("/", auth, s.listProductSegments)
	g.POST("/", auth, s.createProductSegment)
	s.setBodyLimit(http.MethodPost, "/api/product-segments/", maxProductSegmentBody)
	g.POST("/preview/", auth, s.previewProductSegment)
	s.setBodyLimit(http.MethodPost, "/api/product-segments/preview/", maxProductSegmentBody)
	g.GET("/:id/", auth, s.getProductSegment)
	g.PATCH("/:id/", auth, s.patchProductSegment)
	s.setBodyLimit(http.MethodPatch, "/api/product-segments/:id/", maxProductSegmentBody)
	g.DELETE("/:id/", auth, s.deleteProductSegment)
	g.POST("/:id/compute/", auth, s.computeProductSegment)
	g.GET("/:id/members/", auth, s.productSegmentMembers)
}

func (s *Server) listProductSegments(c *gin.Context) {
	out, err := s.d.ProductSegments.Service.List(c.Request.Context(), mustCredential(c).TenantID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) createProductSegment(c *gin.Context) {
	var in prodseg.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.ProductSegments.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, out)
}

func (s *Server) getProductSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.ProductSegments.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) patchProductSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in prodseg.UpdateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.ProductSegments.Service.Update(c.Request.Context(), mustCredential(c).TenantID, id, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) deleteProductSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.ProductSegments.Service.Delete(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// previewProductSegment: the body is the definition itself; errors are keyed by their path in it.
func (s *Server) previewProductSegment(c *gin.Context) {
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		abort(c, err) // *http.MaxBytesError: 413
		return
	}
	out, err := s.d.ProductSegments.Service.Preview(c.Request.Context(), mustCredential(c).TenantID, raw)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

type productSegmentComputeResponse struct {
	Status     string `json:"status"`
	SegmentID  int64  `json:"segment_id"`
	WorkflowID string `json:"workflow_id"`
}

// computeProductSegment marks the segment queued and signals its compute workflow with start.
// When Temporal cannot be reached the segment shows the failure in last_error instead of staying
// queued.
func (s *Server) computeProductSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	tenant := mustCredential(c).TenantID
	if _, err := s.d.ProductSegments.Service.MarkQueued(ctx, tenant, id); err != nil {
		abort(c, err)
		return
	}
	wf, err := s.d.ProductSegments.Jobs.Compute(ctx, tenant, id)
	if err != nil {
		_ = s.d.ProductSegments.Service.MarkError(ctx, tenant, id, "could not start the compute: the workflow service is unavailable")
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, productSegmentComputeResponse{Status: prodseg.StatusQueued, SegmentID: id, WorkflowID: wf})
}

func (s *Server) productSegmentMembers(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	limit, err := queryInt(c, "limit", prodseg.DefaultMembersLimit, 1, prodseg.MaxMembersLimit)
	if err != nil {
		abort(c, err)
		return
	}
	cursor := int64(0)
	if v := c.Query("cursor"); v != "" {
		if cursor, err = strconv.ParseInt(v, 10, 64); err != nil || cursor < 0 {
			abort(c, errs.Invalid("cursor", "must be an offset of 0 or more (the next_cursor of the previous page)"))
			return
		}
	}
	page, err := s.d.ProductSegments.Service.Members(c.Request.Context(), mustCredential(c).TenantID, id, cursor, int(limit))
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, page)
}
