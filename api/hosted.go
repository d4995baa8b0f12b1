package api

import (
	"html"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/pagehost"
)

// Hosted pages (internal/pagehost): GET /p/<tenant_slug>/<page_slug> is a published page as HTML,
// and /p/<tenant_slug>/ has the tenant's sitemap.xml (sitemap-<n>.xml past 50,000 pages),
// robots.txt and llms.txt. No credentials; a CDN may keep every answer (Cache-Control: public,
// for as long as a server keeps a public read) and revalidate it with If-None-Match.

func (s *Server) hostedRoutes(e *gin.Engine) {
	e.GET("/p/:tenant_slug/sitemap.xml", s.hostedSitemap)
	e.GET("/p/:tenant_slug/robots.txt", s.hostedRobots)
	e.GET("/p/:tenant_slug/llms.txt", s.hostedLLMs)
	e.GET("/p/:tenant_slug/:page_slug", s.hostedPage)
}

func (s *Server) pageSettingsRoutes(g *gin.RouterGroup, auth gin.HandlerFunc) {
	g.GET("/settings/", auth, s.getPageSettings)
	g.PUT("/settings/", auth, s.putPageSettings)
}

func (s *Server) getPageSettings(c *gin.Context) {
	out, err := s.d.Pages.Service.CrawlerSettings(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) putPageSettings(c *gin.Context) {
	var in page.CrawlerSettingsInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Pages.Service.SetCrawlerSettings(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusOK, out, err)
}

// publicBase is the origin hosted pages' links use: COHORT_PUBLIC_URL, else the one the request
// came to.
func (s *Server) publicBase(c *gin.Context) (string, error) {
	return requestOrigin(c, s.d.Pages.PublicURL, "the origin of the page's links")
}

var sitemapPartRE = regexp.MustCompile(`^sitemap-([1-9][0-9]{0,5})\.xml$`)

func (s *Server) hostedPage(c *gin.Context) {
	if m := sitemapPartRE.FindStringSubmatch(c.Param("page_slug")); m != nil {
		n, _ := strconv.Atoi(m[1])
		s.hostedSitemapPart(c, n)
		return
	}
	s.serveHostedPage(c, c.Param("tenant_slug"), c.Param("page_slug"), true)
}

// serveHostedPage answers a published page as HTML; a 404 is HTML unless the client prefers
// JSON (htmlErrors false: only when it prefers HTML).
func (s *Server) serveHostedPage(c *gin.Context, tenantSlug, pageSlug string, htmlErrors bool) {
	base, err := s.publicBase(c)
	if err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	if isHead(c.Request) { // a HEAD checks the page; nobody read it
		ctx = page.WithoutCounting(ctx)
	}
	r, err := s.d.Pages.Hosted.Page(ctx, tenantSlug, pageSlug, c.GetHeader("User-Agent"), base)
	if err != nil {
		s.hostedError(c, err, htmlErrors)
		read := metrics.ReadError
		if c.Writer.Status() == http.StatusNotFound {
			read = metrics.ReadNotFound
		}
		s.d.Metrics.PageRead(read)
		return
	}
	s.d.Metrics.PageRead(metrics.ReadOK)
	// The export's policy: only the tracking snippet (by its hash) and the API run scripts.
	c.Header("Content-Security-Policy", pageexport.ContentSecurityPolicy(base))
	s.cacheable(c, r.ETag, r.Body, "text/html; charset=utf-8")
}

// hostedError answers err; a not-found as a small HTML page when the client reads HTML.
func (s *Server) hostedError(c *gin.Context, err error, htmlErrors bool) {
	status, _ := mapError(err)
	if status != http.StatusNotFound || !prefersHTML(c.GetHeader("Accept"), htmlErrors) {
		abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusNotFound, "text/html; charset=utf-8", []byte(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex"><title>Page not found</title></head>
<body><h1>Page not found</h1><p>There is no published page at `+html.EscapeString(c.Request.URL.Path)+`.</p></body></html>
`))
	c.Abort()
}

// cacheControl lets a CDN keep a public answer as long as a server keeps a public read.
func (s *Server) cacheControl() string {
	ttl := s.d.Pages.Service.PublicCacheTTL()
	if ttl < 0 {
		return "no-cache"
	}
	return "public, max-age=" + strconv.Itoa(max(1, int(math.Ceil(ttl.Seconds()))))
}

// cacheable answers body with its ETag and Cache-Control, or 304 when If-None-Match has the tag.
func (s *Server) cacheable(c *gin.Context, etag string, body []byte, contentType string) {
	h := c.Writer.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", s.cacheControl())
	if etagMatches(c.GetHeader("If-None-Match"), etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, contentType, body)
}

// prefersHTML reports whether an Accept header ranks text/html above application/json (each
// takes the quality of its most specific matching range); on a tie (no Accept, */*), def.
func prefersHTML(accept string, def bool) bool {
	if strings.TrimSpace(accept) == "" {
		return def
	}
	var htmlM, jsonM acceptMatch
	for r := range strings.SplitSeq(accept, ",") {
		typ, params, _ := strings.Cut(r, ";")
		typ = strings.ToLower(strings.TrimSpace(typ))
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
		}
		switch typ {
		case "text/html", "application/xhtml+xml":
			htmlM.see(3, q)
		case "application/json":
			jsonM.see(3, q)
		case "text/*":
			htmlM.see(2, q)
		case "application/*":
			jsonM.see(2, q)
		case "*/*":
			htmlM.see(1, q)
			jsonM.see(1, q)
		}
	}
	if htmlM.q == jsonM.q {
		return def
	}
	return htmlM.q > jsonM.q
}

// acceptMatch is the most specific Accept range that matched a type (specificity 0: none, q 0).
type acceptMatch struct {
	spec int
	q    float64
}

func (m *acceptMatch) see(spec int, q float64) {
	if spec > m.spec || spec == m.spec && q > m.q {
		m.spec, m.q = spec, q
	}
}

func (s *Server) hostedSitemap(c *gin.Context) { s.hostedSitemapPart(c, 0) }

func (s *Server) hostedSitemapPart(c *gin.Context, part int) {
	s.hostedDoc(c, "application/xml; charset=utf-8", func(base string) (*pagehost.Doc, error) {
		return s.d.Pages.Hosted.Sitemap(c.Request.Context(), c.Param("tenant_slug"), base, part)
	})
}

func (s *Server) hostedRobots(c *gin.Context) {
	s.hostedDoc(c, "text/plain; charset=utf-8", func(base string) (*pagehost.Doc, error) {
		return s.d.Pages.Hosted.Robots(c.Request.Context(), c.Param("tenant_slug"), base)
	})
}

func (s *Server) hostedLLMs(c *gin.Context) {
	s.hostedDoc(c, "text/plain; charset=utf-8", func(base string) (*pagehost.Doc, error) {
		return s.d.Pages.Hosted.LLMs(c.Request.Context(), c.Param("tenant_slug"), base)
	})
}

func (s *Server) hostedDoc(c *gin.Context, contentType string, get func(base string) (*pagehost.Doc, error)) {
	base, err := s.publicBase(c)
	if err != nil {
		abort(c, err)
		return
	}
	d, err := get(base)
	if err != nil {
		abort(c, err)
		return
	}
	s.cacheable(c, d.ETag, d.Body, contentType)
}
