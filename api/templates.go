package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/pagetemplate"
)

// TemplatesDeps serves page templates.
type TemplatesDeps struct {
	Service *pagetemplate.Service
}

func (s *Server) templateRoutes(a *gin.RouterGroup) {
	g := a.Group("/ai-pages")
	auth := s.require(policyPages)
	g.GET("/templates/", auth, s.listTemplates)
	g.POST("/templates/", auth, s.createTemplate)
	s.setBodyLimit(http.MethodPost, "/api/ai-pages/templates/", maxPageBody)
	g.GET("/templates/:id/", auth, s.getTemplate)
	g.PATCH("/templates/:id/", auth, s.patchTemplate)
	s.setBodyLimit(http.MethodPatch, "/api/ai-pages/templates/:id/", maxPageBody)
	g.DELETE("/templates/:id/", auth, s.deleteTemplate)
}

func (s *Server) templates(c *gin.Context) (*pagetemplate.Service, bool) {
	if s.d.Templates.Service == nil {
		abort(c, errs.Coded(errs.ErrUnavailable, "unavailable", "page templates are not configured in this process"))
		return nil, false
	}
	return s.d.Templates.Service, true
}

func (s *Server) listTemplates(c *gin.Context) {
	svc, ok := s.templates(c)
	if !ok {
		return
	}
	out, err := svc.List(c.Request.Context(), mustCredential(c).TenantID, c.Query("tag"))
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createTemplate(c *gin.Context) {
	svc, ok := s.templates(c)
	if !ok {
		return
	}
	var in pagetemplate.Input
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := svc.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getTemplate(c *gin.Context) {
	svc, ok := s.templates(c)
	if !ok {
		return
	}
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := svc.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) patchTemplate(c *gin.Context) {
	svc, ok := s.templates(c)
	if !ok {
		return
	}
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in pagetemplate.Input
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := svc.Update(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) deleteTemplate(c *gin.Context) {
	svc, ok := s.templates(c)
	if !ok {
		return
	}
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := svc.Delete(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
