package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/errs"
)

// DesignDeps serves the tenant's design system and the extraction of suggestions from an image.
type DesignDeps struct {
	Store *design.Store
	// Extractor fetches and reads images for POST .../design-system/extract/; nil answers 503.
	Extractor *design.Extractor
}

// maxDesignBody caps a design system PUT: 64 KB of custom CSS, escaped, fits.
const maxDesignBody = 512 << 10

func (s *Server) designRoutes(a *gin.RouterGroup) {
	g := a.Group("/ai-pages")
	auth := s.require(policyPages)
	g.GET("/design-system/", auth, s.getDesignSystem)
	g.PUT("/design-system/", auth, s.putDesignSystem)
	s.setBodyLimit(http.MethodPut, "/api/ai-pages/design-system/", maxDesignBody)
	g.POST("/design-system/extract/", auth, s.spend(ai.OpDesignExtract), s.extractDesignSystem)
}

func (s *Server) designStore(c *gin.Context) (*design.Store, bool) {
	if s.d.Design.Store == nil {
		abort(c, errs.Coded(errs.ErrUnavailable, "unavailable", "the design system is not configured in this process"))
		return nil, false
	}
	return s.d.Design.Store, true
}

func (s *Server) getDesignSystem(c *gin.Context) {
	st, ok := s.designStore(c)
	if !ok {
		return
	}
	out, err := st.Get(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) putDesignSystem(c *gin.Context) {
	st, ok := s.designStore(c)
	if !ok {
		return
	}
	var in design.Patch
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := st.Update(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusOK, out, err)
}

type extractRequest struct {
	ImageURL *string `json:"image_url"`
}

// extractDesignSystem is POST /api/ai-pages/design-system/extract/: the image is fetched and
// decoded first (every refusal a JSON 400 on image_url), then the suggestions stream as
// text/event-stream in the build stream's framing ("data: <JSON>" and a blank line per event,
// flushed), ending with done. Nothing is saved.
func (s *Server) extractDesignSystem(c *gin.Context) {
	x := s.d.Design.Extractor
	if x == nil {
		abort(c, errs.Coded(errs.ErrUnavailable, "unavailable", "design extraction is not configured in this process"))
		return
	}
	var in extractRequest
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	if in.ImageURL == nil {
		abort(c, errs.Invalid("image_url", "is required"))
		return
	}
	ctx := c.Request.Context()
	src, err := x.Fetch(ctx, *in.ImageURL)
	if err != nil {
		abort(c, err)
		return
	}
	stream := startSSE(c, buildKeepAlive)
	defer stream.close()
	// An error here means the client left (a failed write) or its context ended: nobody reads on.
	_ = x.Stream(ctx, src, func(e design.Event) error { return stream.send(e) })
}
