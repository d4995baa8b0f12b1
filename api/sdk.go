package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// SDKBundle is the client library's browser bundle (sdk/js/dist/cohort.min.js) and its version.
type SDKBundle struct {
	Version string // package.json version, e.g. "1.0.0"
	Script  []byte
}

// sdkAsset is the bundle prepared once: its ETag and gzip-compressed body.
type sdkAsset struct {
	version string
	script  []byte
	gzipped []byte
	etag    string
}

func newSDKAsset(b *SDKBundle) *sdkAsset {
	if b == nil {
		return nil
	}
	sum := sha256.Sum256(b.Script)
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = w.Write(b.Script)
	_ = w.Close()
	return &sdkAsset{version: b.Version, script: b.Script, gzipped: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

// sdkRoutes serves the browser bundle for one-script-tag use:
//   - /sdk/v1/cohort.min.js: the newest 1.x bundle; cached for a day and then revalidated (ETag),
//     so a page picks up a fix within a day without a change of its own;
//   - /sdk/v<version>/cohort.min.js (e.g. /sdk/v1.0.0/): exactly that version, cached for a year
//     as immutable; any other version is a 404.
//
// Scripts need no CORS, but the answer carries Access-Control-Allow-Origin: * and
// Cross-Origin-Resource-Policy: cross-origin so pages with COEP or that load it with fetch can.
func (s *Server) sdkRoutes(e *gin.Engine) {
	e.GET("/sdk/:version/cohort.min.js", s.serveSDK)
}

func (s *Server) serveSDK(c *gin.Context) {
	a := s.sdk
	v := c.Param("version")
	var cache string
	switch {
	case len(a.script) == 0:
		abort(c, codedNotFound("this server was built without the client library bundle"))
		return
	case v == "v1" && strings.HasPrefix(a.version, "1."):
		cache = "public, max-age=86400, stale-while-revalidate=604800"
	case v == "v"+a.version:
		cache = "public, max-age=31536000, immutable"
	default:
		abort(c, codedNotFound("no client library bundle "+v+"; this server has v1 (version "+a.version+")"))
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", cache)
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	if etagMatches(c.GetHeader("If-None-Match"), a.etag) {
		c.Status(http.StatusNotModified)
		return
	}
	body := a.script
	if acceptsGzip(c.GetHeader("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = a.gzipped
	}
	c.Data(http.StatusOK, h.Get("Content-Type"), body)
}

// etagMatches reports whether an If-None-Match header names etag (or is "*"), by the weak
// comparison If-None-Match uses: "W/" aside on both sides.
func etagMatches(header, etag string) bool {
	etag = strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (and does not refuse it with q=0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
