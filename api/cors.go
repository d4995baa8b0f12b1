package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/auth"
)

// Browser access (CORS). Only the endpoints a web page calls are browser-callable: event
// ingestion, the pk_ session handshake and the Segment-compatible /v1/ endpoints. Their preflights
// are answered for any origin (a preflight carries no credential, so whose tenant it is cannot be
// known); the answer of the actual request is readable by the page only when it was made with a
// public key or a session token. Secret keys and Bearer tokens get no CORS headers, so a browser
// cannot read what a secret-key call answers. A tenant may list the origins its pages run on
// (cohort tenants set --allowed-origins); answers are then readable only there. No cookies are
// used: there is no Access-Control-Allow-Credentials.

const (
	corsAllowMethods  = "POST, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Content-Encoding, X-API-Key"
	corsExposeHeaders = "Retry-After, X-Request-ID"
	corsMaxAge        = "600"

	// ctxPresented is the credential require() authenticated, set even when the endpoint then
	// refuses its kind (403): the CORS decision follows the credential, not the outcome.
	ctxPresented = "cohort.presented_credential"
	// ctxSecretInBody marks a beacon body that carried a secret key: refused, and never readable.
	ctxSecretInBody = "cohort.secret_in_body"
)

// browserCallable reports whether a path is one of the endpoints CORS applies to.
func browserCallable(path string) bool {
	switch path {
	case "/api/ingestion/track/", "/api/ingestion/track/batch/", "/api/auth/session/":
		return true
	}
	return strings.HasPrefix(path, "/v1/")
}

// cors answers preflights of the browser-callable endpoints and adds Access-Control-Allow-Origin
// to their answers when the credential allows it (see corsAllowed). Other paths, and requests
// without an Origin header (servers), pass through untouched.
func (s *Server) cors(c *gin.Context) {
	if publicRead(c.Request.URL.Path) {
		publicCORS(c)
		return
	}
	origin := c.GetHeader("Origin")
	if origin == "" || !browserCallable(c.Request.URL.Path) {
		c.Next()
		return
	}
	if c.Request.Method == http.MethodOptions {
		h := c.Writer.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		h.Add("Vary", "Origin")
		c.AbortWithStatus(http.StatusNoContent)
		return
	}
	w := &corsWriter{ResponseWriter: c.Writer, s: s, c: c, origin: origin}
	c.Writer = w
	c.Next()
	// A handler that set a status without writing a body: gin writes the header after the chain.
	w.apply()
}

// Published pages are public: the public JSON read and the hosted pages (/p/...) are readable
// by a page of any origin, without credentials (Access-Control-Allow-Origin: *, the same answer
// for every origin, so a CDN keeps one copy), and their preflights are answered.
const (
	publicCORSMethods = "GET, HEAD, OPTIONS"
	publicCORSHeaders = "Accept, If-None-Match"
	publicCORSExpose  = "ETag, Retry-After, X-Request-ID"
)

// publicRead reports whether a path is a published page's public read.
func publicRead(path string) bool {
	return strings.HasPrefix(path, "/api/ai-pages/public/pages/") || strings.HasPrefix(path, "/p/")
}

// publicCORS lets any origin read a public answer; an OPTIONS is a preflight, answered here.
func publicCORS(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	if c.Request.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", publicCORSMethods)
		h.Set("Access-Control-Allow-Headers", publicCORSHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		c.AbortWithStatus(http.StatusNoContent)
		return
	}
	h.Set("Access-Control-Expose-Headers", publicCORSExpose)
	c.Next()
}

// corsAllowed decides, when the answer is written, whether the page at origin may read it: a
// public key or a session token yes, if the tenant lists no allowed origins or lists this one; a
// secret key (in a header, HTTP Basic or a beacon body) or a Bearer token no. A request refused
// before any credential was authenticated (missing, unknown or expired) is readable, so the client
// library can see the 401 and refresh its session, unless it presented a secret key.
func (s *Server) corsAllowed(c *gin.Context, origin string) bool {
	for _, key := range []string{ctxPresented, ctxCred} {
		if v, ok := c.Get(key); ok {
			if cred, ok := v.(auth.Credential); ok {
				if cred.Kind != auth.KindPublicKey && cred.Kind != auth.KindSession {
					return false
				}
				return s.originAllowed(c.Request.Context(), cred.TenantID, origin)
			}
		}
	}
	return !c.GetBool(ctxSecretInBody) && !presentsSecretKey(c.Request)
}

// OriginStore gives a tenant's allowed browser origins, normalized as browsers send them
// (tenant.NormalizeOrigin); none means any origin. *tenant.Service implements it.
type OriginStore interface {
	AllowedOrigins(ctx context.Context, tenantID int64) ([]string, error)
}

// originCacheTTL bounds how long a change of a tenant's allowed origins takes to reach every server.
const originCacheTTL = 30 * time.Second

// originCache holds tenants' allowed origins for originCacheTTL.
type originCache struct {
	mu sync.Mutex
	m  map[int64]originEntry
}

type originEntry struct {
	origins []string
	expires time.Time
}

// originAllowed reports whether the tenant lets pages of origin read answers. A store that cannot
// answer fails closed: the request itself is served, only its answer is not readable.
func (s *Server) originAllowed(ctx context.Context, tenantID int64, origin string) bool {
	if s.d.Origins == nil {
		return true
	}
	now := s.d.Now()
	s.origins.mu.Lock()
	e, ok := s.origins.m[tenantID]
	s.origins.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		list, err := s.d.Origins.AllowedOrigins(ctx, tenantID)
		if err != nil {
			s.d.Logger.Warn("allowed origins lookup", "tenant_id", tenantID, "error", err.Error())
			return false
		}
		e = originEntry{origins: list, expires: now.Add(originCacheTTL)}
		s.origins.mu.Lock()
		if s.origins.m == nil {
			s.origins.m = map[int64]originEntry{}
		}
		s.origins.m[tenantID] = e
		s.origins.mu.Unlock()
	}
	if len(e.origins) == 0 {
		return true
	}
	for _, o := range e.origins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// presentsSecretKey reports whether the request's headers carry something shaped like a secret key:
// Authorization: ApiKey sk_..., Authorization: Basic of sk_...:, or X-API-Key: sk_....
func presentsSecretKey(r *http.Request) bool {
	if strings.HasPrefix(strings.TrimSpace(r.Header.Get("X-API-Key")), "sk_") {
		return true
	}
	scheme, value, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	value = strings.TrimSpace(value)
	switch strings.ToLower(scheme) {
	case "apikey":
		return strings.HasPrefix(value, "sk_")
	case "basic":
		user, err := base64.StdEncoding.DecodeString(value)
		return err != nil || strings.HasPrefix(strings.TrimSpace(string(user)), "sk_")
	}
	return false
}

// corsWriter adds the CORS headers just before the answer's header is written, when the
// credential is known.
type corsWriter struct {
	gin.ResponseWriter
	s       *Server
	c       *gin.Context
	origin  string
	applied bool
}

func (w *corsWriter) apply() {
	if w.applied || w.ResponseWriter.Written() {
		return
	}
	w.applied = true
	if !w.s.corsAllowed(w.c, w.origin) {
		return
	}
	h := w.ResponseWriter.Header()
	h.Set("Access-Control-Allow-Origin", w.origin)
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	h.Add("Vary", "Origin")
}

func (w *corsWriter) WriteHeaderNow() {
	w.apply()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *corsWriter) Write(b []byte) (int, error) {
	w.apply()
	return w.ResponseWriter.Write(b)
}

func (w *corsWriter) WriteString(s string) (int, error) {
	w.apply()
	return w.ResponseWriter.WriteString(s)
}

func (w *corsWriter) Flush() {
	w.apply()
	w.ResponseWriter.Flush()
}
