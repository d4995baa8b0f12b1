package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/errs"
)

// CatalogDeps are the product catalogue endpoints' dependencies.
type CatalogDeps struct {
	Service *catalog.Service
	// Imports serves /api/pim/import/ (503 when nil).
	Imports *imports.Service
}

// Body limits of the catalogue.
const (
	maxSchemaBody  = 256 << 10
	maxProductBody = 512 << 10
	maxBulkBody    = 16 << 20                     // 1,000 products
	maxImportBody  = imports.MaxFileBytes + 1<<20 // the file and the multipart envelope
	maxConfirmBody = 4 << 20                      // a mapping of up to 4,096 headers and a schema
)

func (s *Server) catalogRoutes(a *gin.RouterGroup) {
	g := a.Group("/pim")
	auth := s.require(policyCatalog)
	g.GET("/schema/", auth, s.getProductSchema)
	g.PUT("/schema/", auth, s.putProductSchema)
	s.setBodyLimit(http.MethodPut, "/api/pim/schema/", maxSchemaBody)
	g.GET("/products/", auth, s.listProducts)
	g.POST("/products/", auth, s.createProduct)
	s.setBodyLimit(http.MethodPost, "/api/pim/products/", maxProductBody)
	g.POST("/products/bulk/", auth, s.bulkProducts)
	s.setBodyLimit(http.MethodPost, "/api/pim/products/bulk/", maxBulkBody)
	g.GET("/products/:id/", auth, s.getProduct)
	g.PATCH("/products/:id/", auth, s.patchProduct)
	s.setBodyLimit(http.MethodPatch, "/api/pim/products/:id/", maxProductBody)
	g.DELETE("/products/:id/", auth, s.deleteProduct)
	g.GET("/facets/", auth, s.productFacets)
	imp := g.Group("/import", auth, s.importsAvailable)
	imp.POST("/csv/", s.uploadImport)
	s.setBodyLimit(http.MethodPost, "/api/pim/import/csv/", maxImportBody)
	imp.GET("/:job_id/", s.getImport)
	imp.POST("/:job_id/confirm/", s.confirmImport)
	s.setBodyLimit(http.MethodPost, "/api/pim/import/:job_id/confirm/", maxConfirmBody)
}

// importsAvailable answers 503 where the process was built without CSV imports.
func (s *Server) importsAvailable(c *gin.Context) {
	if s.d.Catalog.Imports == nil {
		abort(c, errs.Coded(errs.ErrUnavailable, "unavailable", "CSV imports are not configured in this process"))
	}
}

// uploadImport takes the CSV from the multipart field "file" (other fields are ignored),
// streams it to the blob store and answers the analysis: 201 with the job in status mapping.
func (s *Server) uploadImport(c *gin.Context) {
	mr, err := c.Request.MultipartReader()
	if err != nil {
		abort(c, errs.Coded(errs.ErrInvalid, "invalid_content_type", "send the CSV as multipart/form-data, the file in the field \"file\""))
		return
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			abort(c, errs.Invalid("file", "is required: the CSV file, as the multipart field \"file\""))
			return
		}
		if err != nil {
			abort(c, uploadError(&imports.UploadError{Err: err}))
			return
		}
		if part.FormName() != "file" {
			_ = part.Close()
			continue
		}
		job, err := s.d.Catalog.Imports.Upload(c.Request.Context(), mustCredential(c).TenantID, part.FileName(), part)
		if err != nil {
			abort(c, uploadError(err))
			return
		}
		c.JSON(http.StatusCreated, job)
		return
	}
}

// uploadError words a broken upload as a 400, keeping 413 for a body over the limit.
func uploadError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err
	}
	var ue *imports.UploadError
	if errors.As(err, &ue) {
		return errs.Coded(errs.ErrInvalid, "bad_upload", "the multipart upload could not be read: %v", ue.Err)
	}
	return err
}

func (s *Server) getImport(c *gin.Context) {
	id, ok := pathID(c, "job_id")
	if !ok {
		return
	}
	job, err := s.d.Catalog.Imports.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, job, err)
}

func (s *Server) confirmImport(c *gin.Context) {
	id, ok := pathID(c, "job_id")
	if !ok {
		return
	}
	var in imports.ConfirmInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	job, err := s.d.Catalog.Imports.Confirm(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, job, err)
}

func (s *Server) getProductSchema(c *gin.Context) {
	out, err := s.d.Catalog.Service.Schema(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) putProductSchema(c *gin.Context) {
	var in catalog.Schema
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Catalog.Service.PutSchema(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusOK, out, err)
}

// listProducts: q, page, page_size, and any other parameter is an exact match on that data field.
func (s *Server) listProducts(c *gin.Context) {
	q := catalog.ListQuery{Filters: map[string]string{}}
	f := errs.Fields{}
	for name, vals := range c.Request.URL.Query() {
		if len(vals) != 1 {
			f.Add(name, "give one value")
			continue
		}
		switch name {
		case "q":
			q.Q = vals[0]
		case "page", "page_size":
		default:
			q.Filters[name] = vals[0]
		}
	}
	page, err := queryInt(c, "page", 1, 1, 1<<31-1)
	if err != nil {
		abort(c, err)
		return
	}
	size, err := queryInt(c, "page_size", catalog.DefaultPageSize, 1, catalog.MaxPageSize)
	if err != nil {
		abort(c, err)
		return
	}
	if err := f.Err(); err != nil {
		abort(c, err)
		return
	}
	q.Page, q.PageSize = int(page), int(size)
	out, err := s.d.Catalog.Service.List(c.Request.Context(), mustCredential(c).TenantID, q)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createProduct(c *gin.Context) {
	var in catalog.ProductInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Catalog.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getProduct(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Catalog.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) patchProduct(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in catalog.ProductPatch
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Catalog.Service.Update(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) deleteProduct(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.Catalog.Service.Delete(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) bulkProducts(c *gin.Context) {
	var in struct {
		Products []map[string]any `json:"products"`
	}
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	if in.Products == nil {
		abort(c, errs.Invalid("products", "is required: an array of at most 1000 products"))
		return
	}
	out, err := s.d.Catalog.Service.Bulk(c.Request.Context(), mustCredential(c).TenantID, in.Products)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) productFacets(c *gin.Context) {
	out, err := s.d.Catalog.Service.Facets(c.Request.Context(), mustCredential(c).TenantID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"facets": out})
}
