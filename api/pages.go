package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagebuild"
	"github.com/cohort-dev/cohort/internal/pagehost"
)

// PagesDeps are the AI landing page endpoints' dependencies. The service starts generation (its
// page.Generator) and counts public reads (its Run loop is the role's to run).
type PagesDeps struct {
	Service *page.Service
	// Builder runs the page builder agent (POST .../build/, GET .../builds/); nil answers 503.
	Builder *pagebuild.Service
	// BuildKeepAlive is how long a build stream may stay silent before it gets a comment line
	// (default 15 s).
	BuildKeepAlive time.Duration
	// Hosted serves published pages as HTML (/p/..., and the public JSON route when the client
	// prefers HTML) with the tenants' sitemap.xml, robots.txt and llms.txt; nil: not served.
	Hosted *pagehost.Service
	// PublicURL is the origin hosted pages' links use (COHORT_PUBLIC_URL); when empty, the
	// origin the request came to.
	PublicURL string
}

// maxPageBody caps page and AIQuery bodies: a PATCH of a page's blocks (at most 100) fits.
const maxPageBody = 2 << 20

func (s *Server) pageRoutes(a *gin.RouterGroup) {
	g := a.Group("/ai-pages")
	auth := s.require(policyPages)

	g.GET("/queries/", auth, s.listAIQueries)
	g.POST("/queries/", auth, s.createAIQuery)
	g.GET("/queries/:id/", auth, s.getAIQuery)
	g.PATCH("/queries/:id/", auth, s.patchAIQuery)
	g.DELETE("/queries/:id/", auth, s.deleteAIQuery)

	g.GET("/pages/", auth, s.listPages)
	g.POST("/pages/", auth, s.createPage)
	g.POST("/pages/bulk-generate/", auth, s.spend(ai.OpPageCopy), s.bulkGeneratePages)
	g.GET("/pages/:id/", auth, s.getPage)
	g.PATCH("/pages/:id/", auth, s.patchPage)
	s.setBodyLimit(http.MethodPatch, "/api/ai-pages/pages/:id/", maxPageBody)
	g.DELETE("/pages/:id/", auth, s.deletePage)
	g.POST("/pages/:id/regenerate/", auth, s.spend(ai.OpPageCopy), s.regeneratePage)
	g.GET("/pages/:id/versions/", auth, s.listPageVersions)
	g.GET("/pages/:id/versions/:n/", auth, s.getPageVersion)
	g.POST("/pages/:id/versions/:n/restore/", auth, s.restorePageVersion)
	g.POST("/pages/:id/build/", auth, s.spend(ai.OpBuild), s.buildPage)
	s.setBodyLimit(http.MethodPost, "/api/ai-pages/pages/:id/build/", maxBuildBody)
	g.GET("/pages/:id/builds/", auth, s.listPageBuilds)

	g.GET("/jobs/", auth, s.listBulkJobs)
	g.GET("/jobs/:id/", auth, s.getBulkJob)

	s.pageSettingsRoutes(g, auth)

	g.GET("/public/pages/:tenant_slug/:page_slug/", s.publicPage)
}

func (s *Server) listAIQueries(c *gin.Context) {
	out, err := s.d.Pages.Service.ListQueries(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createAIQuery(c *gin.Context) {
	var in page.QueryInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Pages.Service.CreateQuery(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getAIQuery(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Pages.Service.GetQuery(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) patchAIQuery(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in page.QueryPatch
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Pages.Service.UpdateQuery(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) deleteAIQuery(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.Pages.Service.DeleteQuery(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) listPages(c *gin.Context) {
	out, err := s.d.Pages.Service.ListPages(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createPage(c *gin.Context) {
	var in page.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	if in.TemplateID == nil && !s.allowSpend(c, ai.OpPageCopy) { // a template's page generates nothing
		return
	}
	out, err := s.d.Pages.Service.CreatePage(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getPage(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Pages.Service.GetPage(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) patchPage(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in page.PatchInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Pages.Service.PatchPage(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) deletePage(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx, tenantID := c.Request.Context(), mustCredential(c).TenantID
	var err error
	if s.d.Exports != nil {
		// Deleting the page revokes its exports' download links.
		err = s.d.Exports.Service.DeletePage(ctx, tenantID, id, s.d.Pages.Service)
	} else {
		err = s.d.Pages.Service.DeletePage(ctx, tenantID, id)
	}
	if err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

type queuedResponse struct {
	Status string `json:"status"`
}

func (s *Server) regeneratePage(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.Pages.Service.Regenerate(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, queuedResponse{Status: "queued"})
}

func (s *Server) bulkGeneratePages(c *gin.Context) {
	out, err := s.d.Pages.Service.BulkGenerate(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusAccepted, out, err)
}

// versionN reads the version number from the path; anything but a positive integer is 404.
func versionN(c *gin.Context) (int, bool) {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n <= 0 {
		abort(c, codedNotFound("no version "+strconv.Quote(c.Param("n"))))
		return 0, false
	}
	return n, true
}

func (s *Server) listPageVersions(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Pages.Service.ListVersions(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) getPageVersion(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	n, ok := versionN(c)
	if !ok {
		return
	}
	out, err := s.d.Pages.Service.GetVersion(c.Request.Context(), mustCredential(c).TenantID, id, n)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) restorePageVersion(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	n, ok := versionN(c)
	if !ok {
		return
	}
	out, err := s.d.Pages.Service.RestoreVersion(c.Request.Context(), mustCredential(c).TenantID, id, n)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) listBulkJobs(c *gin.Context) {
	out, err := s.d.Pages.Service.ListBulkJobs(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) getBulkJob(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Pages.Service.BulkJob(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

// publicPage serves a published page without credentials; the service renders the body (it
// counts the read, and keeps the page briefly in memory). A client that prefers HTML gets the
// hosted page. The answer carries a weak ETag (view_count aside, the page as published) and
// Cache-Control; If-None-Match with it answers 304 (still a read, counted).
func (s *Server) publicPage(c *gin.Context) {
	if s.d.Pages.Service == nil {
		abort(c, codedNotFound("page not found"))
		return
	}
	if s.d.Pages.Hosted != nil {
		c.Header("Vary", "Accept")
		if prefersHTML(c.GetHeader("Accept"), false) {
			s.serveHostedPage(c, c.Param("tenant_slug"), c.Param("page_slug"), false)
			return
		}
	}
	ctx := c.Request.Context()
	if isHead(c.Request) { // a HEAD checks the page; nobody read it
		ctx = page.WithoutCounting(ctx)
	}
	ctx = s.visitorContext(ctx, c)
	body, etag, err := s.d.Pages.Service.PublicJSON(ctx, c.Param("tenant_slug"), c.Param("page_slug"), c.GetHeader("User-Agent"))
	if err != nil {
		abort(c, err)
		read := metrics.ReadError
		if c.Writer.Status() == http.StatusNotFound {
			read = metrics.ReadNotFound
		}
		s.d.Metrics.PageRead(read)
		return
	}
	s.d.Metrics.PageRead(metrics.ReadOK)
	s.cacheable(c, etag, body, "application/json; charset=utf-8")
}

// visitorContext honours X-Cohort-Visitor-User-Agent (page.VisitorUserAgentHeader): a storefront
// that renders server-side passes its visitor's User-Agent with its key, and the read is counted
// as the visitor's. Only a secret key (Authorization: ApiKey sk_ or X-API-Key) or a Bearer token,
// the credentials of the other /api/ai-pages/ routes, counts, and only for a page of its tenant
// (the service compares); without one, with a public key or session token (they live in
// browsers), or with an invalid one the header is ignored and the read stays a public read
// counted with the request's own User-Agent, never a 401.
func (s *Server) visitorContext(ctx context.Context, c *gin.Context) context.Context {
	vals, ok := c.Request.Header[http.CanonicalHeaderKey(page.VisitorUserAgentHeader)]
	if !ok || s.d.Auth == nil {
		return ctx
	}
	cred, err := s.d.Auth.Authenticate(ctx, c.GetHeader("Authorization"), c.GetHeader("X-API-Key"), true)
	if err != nil || (cred.Kind != auth.KindSecretKey && cred.Kind != auth.KindBearer) {
		return ctx
	}
	ua := ""
	if len(vals) > 0 {
		ua = vals[0]
	}
	return page.WithVisitorUserAgent(ctx, cred.TenantID, ua)
}
