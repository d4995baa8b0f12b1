package api

import (
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ProductSegmentsDeps are the product segment endpoints' dependencies. The service starts
// computes (its prodseg.ComputeStarter).
type ProductSegmentsDeps struct {
	Service *prodseg.Service
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
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createProductSegment(c *gin.Context) {
	var in prodseg.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.ProductSegments.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getProductSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.ProductSegments.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
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
	reply(c, http.StatusOK, out, err)
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
	if err := checkJSONText(raw); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.ProductSegments.Service.Preview(c.Request.Context(), mustCredential(c).TenantID, raw)
	reply(c, http.StatusOK, out, err)
}

type productSegmentComputeResponse struct {
	Status     string `json:"status"`
	SegmentID  int64  `json:"segment_id"`
	WorkflowID string `json:"workflow_id"`
}

// computeProductSegment requests a compute (prodseg.Service.RequestCompute: queued, then the
// workflow started or signalled; a failed start shows in last_error instead of staying queued).
func (s *Server) computeProductSegment(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	wf, err := s.d.ProductSegments.Service.RequestCompute(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
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
	reply(c, http.StatusOK, page, err)
}
