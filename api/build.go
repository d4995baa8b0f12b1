package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/pagebuild"
)

// buildKeepAlive is how long a build stream may stay idle before it gets a comment line, so
// proxies and clients do not close it (PagesDeps.BuildKeepAlive overrides it).
const buildKeepAlive = 15 * time.Second

// maxBuildBody caps a build request: a message of 4,000 characters, escaped, fits.
const maxBuildBody = 64 << 10

type buildRequest struct {
	Message *string `json:"message"`
}

// buildPage is POST /api/ai-pages/pages/{id}/build/: it checks the request (400, 403, 404, 409
// as JSON errors), then streams the build's events as text/event-stream, one "data: <JSON>" line
// and a blank line per event, flushed as each happens, ending with done.
func (s *Server) buildPage(c *gin.Context) {
	if s.d.Pages.Builder == nil {
		abort(c, errs.Coded(errs.ErrUnavailable, "unavailable", "the page builder is not configured in this process"))
		return
	}
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in buildRequest
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	if in.Message == nil {
		abort(c, errs.Invalid("message", "is required"))
		return
	}
	ctx := c.Request.Context()
	run, err := s.d.Pages.Builder.Begin(ctx, mustCredential(c).TenantID, id, *in.Message)
	if err != nil {
		abort(c, err)
		return
	}

	every := s.d.Pages.BuildKeepAlive
	if every <= 0 {
		every = buildKeepAlive
	}
	stream := startSSE(c, every)
	defer stream.close()
	run.Execute(ctx, func(e pagebuild.Event) error { return stream.send(e) })
}

// listPageBuilds is GET /api/ai-pages/pages/{id}/builds/: the page's builds, newest first.
func (s *Server) listPageBuilds(c *gin.Context) {
	if s.d.Pages.Builder == nil {
		abort(c, errs.Coded(errs.ErrUnavailable, "unavailable", "the page builder is not configured in this process"))
		return
	}
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Pages.Builder.List(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}
