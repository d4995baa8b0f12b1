package api

import (
	"net/http"
	"regexp"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/pageexport"
)

// ExportsDeps serve page exports: POST and GET /api/ai-pages/pages/<id>/export/.
type ExportsDeps struct {
	Service *pageexport.Service
	// PublicURL is the API origin the exports' tracking snippet calls (COHORT_PUBLIC_URL); when
	// empty, the origin the export request came to.
	PublicURL string
}

// maxExportBody caps an export request ({"format": "..."}).
const maxExportBody = 4 << 10

func (s *Server) exportRoutes(a *gin.RouterGroup) {
	auth := s.require(policyPages)
	a.POST("/ai-pages/pages/:id/export/", auth, s.startPageExport)
	s.setBodyLimit(http.MethodPost, "/api/ai-pages/pages/:id/export/", maxExportBody)
	a.GET("/ai-pages/pages/:id/export/", auth, s.getPageExport)
}

type exportRequest struct {
	Format string `json:"format"`
}

// hostRE is a request's Host as the snippet's API origin may use it.
var hostRE = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$`)

// exportAPIBase is the origin the tracking snippet of an export calls.
func (s *Server) exportAPIBase(c *gin.Context) (string, error) {
	return requestOrigin(c, s.d.Exports.PublicURL, "the API address of the export")
}

// requestOrigin is configured (COHORT_PUBLIC_URL) when set, else the origin the request came to;
// a Host that cannot be used in a link is a 400 naming what it was for.
func requestOrigin(c *gin.Context, configured, what string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	host := c.Request.Host
	if !hostRE.MatchString(host) {
		return "", errs.Coded(errs.ErrInvalid, "bad_host", "the request's Host cannot be used as %s; set COHORT_PUBLIC_URL", what)
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + host, nil
}

func (s *Server) startPageExport(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in exportRequest
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	base, err := s.exportAPIBase(c)
	if err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Exports.Service.Start(c.Request.Context(), mustCredential(c).TenantID, id, in.Format, base)
	reply(c, http.StatusAccepted, out, err)
}

func (s *Server) getPageExport(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var exportID int64
	if raw, set := c.GetQuery("export_id"); set {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n <= 0 {
			abort(c, errs.Invalid("export_id", "must be a positive integer: the export_id the export request returned"))
			return
		}
		exportID = n
	}
	ctx := c.Request.Context()
	e, err := s.d.Exports.Service.Get(ctx, mustCredential(c).TenantID, id, exportID)
	if err != nil {
		abort(c, err)
		return
	}
	if e, err = s.d.Exports.Service.WithLink(ctx, e); err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}
