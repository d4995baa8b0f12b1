package api

import (
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/pageexport"
)

// downloadBlob serves GET /api/blobs/<key>?expires=&sig=: the signed, expiring download links of
// the embedded blob store. In production links point at GCS instead and this route answers 404.
// A page export's file is served only while its export exists (pageexport.Downloadable), and an
// HTML export with a Content-Security-Policy that lets only its tracking snippet run.
func (s *Server) downloadBlob(c *gin.Context) {
	if s.d.LocalBlob == nil {
		abort(c, codedNotFound("downloads are served by the blob store's own signed URLs"))
		return
	}
	key := strings.TrimPrefix(c.Param("key"), "/")
	if err := s.d.LocalBlob.Verify(key, c.Query("expires"), c.Query("sig")); err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	// A page export's link works only while the export does: deleting its page revokes it.
	csp := ""
	if pageexport.IsKey(key) {
		if s.d.Exports == nil {
			abort(c, codedNotFound("not found"))
			return
		}
		e, err := s.d.Exports.Service.Downloadable(ctx, key)
		if err != nil {
			abort(c, err)
			return
		}
		if e.Format == pageexport.HTML {
			csp = pageexport.ContentSecurityPolicy(e.APIBase)
		}
	}
	info, err := s.d.LocalBlob.Stat(ctx, key)
	if err != nil {
		abort(c, err)
		return
	}
	r, err := s.d.LocalBlob.Open(ctx, key)
	if err != nil {
		abort(c, err)
		return
	}
	defer func() { _ = r.Close() }()
	c.Header("Content-Type", info.ContentType)
	c.Header("Content-Disposition", `attachment; filename="`+strings.ReplaceAll(path.Base(key), `"`, "")+`"`)
	c.Header("Cache-Control", "private, no-store")
	if csp != "" {
		c.Header("Content-Security-Policy", csp)
	}
	if rs, ok := r.(io.ReadSeeker); ok {
		http.ServeContent(c.Writer, c.Request, "", info.Updated, rs)
		return
	}
	c.Header("Content-Length", strconv.FormatInt(info.Size, 10))
	c.Status(http.StatusOK)
	_, _ = io.Copy(c.Writer, r)
}
