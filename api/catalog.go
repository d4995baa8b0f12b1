package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
)

// CatalogDeps are the product catalogue endpoints' dependencies.
type CatalogDeps struct {
	Service *catalog.Service
}

// Body limits of the catalogue.
const (
	maxSchemaBody  = 256 << 10
	maxProductBody = 512 << 10
	maxBulkBody    = 16 << 20 // 1,000 products
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
}

func (s *Server) getProductSchema(c *gin.Context) {
	out, err := s.d.Catalog.Service.Schema(c.Request.Context(), mustCredential(c).TenantID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) putProductSchema(c *gin.Context) {
	var in catalog.Schema
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Catalog.Service.PutSchema(c.Request.Context(), mustCredential(c).TenantID, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
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
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) createProduct(c *gin.Context) {
	var in catalog.ProductInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Catalog.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, out)
}

func (s *Server) getProduct(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Catalog.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
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
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
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
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) productFacets(c *gin.Context) {
	out, err := s.d.Catalog.Service.Facets(c.Request.Context(), mustCredential(c).TenantID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"facets": out})
}
