package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
)

const (
	ctxRequestID = "cohort.request_id"
	ctxErr       = "cohort.error"
	ctxCred      = "cohort.credential"
)

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestID takes a sane X-Request-ID from the caller or makes one, and echoes it.
func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if !requestIDRE.MatchString(id) {
		id = newRequestID()
	}
	c.Set(ctxRequestID, id)
	c.Header("X-Request-ID", id)
	c.Next()
}

// recover turns a panic into a logged 500 in the error shape.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.d.Logger.Error("panic in handler", "request_id", c.GetString(ctxRequestID),
				"route", c.FullPath(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				c.AbortWithStatusJSON(http.StatusInternalServerError, ErrorBody{Error: ErrorDetail{
					Code: "internal", Message: "internal error", RequestID: c.GetString(ctxRequestID)}})
			}
		}
	}()
	c.Next()
}

type httpMetrics struct {
	duration *prometheus.HistogramVec
	inflight prometheus.Gauge
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cohort_http_request_duration_seconds",
			Help:    "HTTP request latency by route and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route", "status"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cohort_http_requests_in_flight", Help: "HTTP requests being served.",
		}),
	}
	reg.MustRegister(m.duration, m.inflight)
	return m
}

// outcomeOf is the metrics outcome of a request answered with an error: rejected for a 4xx (the
// caller's input), error for a 5xx.
func outcomeOf(c *gin.Context) string {
	if c.Writer.Status() < http.StatusInternalServerError {
		return metrics.OutcomeRejected
	}
	return metrics.OutcomeError
}

func (s *Server) metricsHandler() gin.HandlerFunc {
	h := promhttp.HandlerFor(s.d.Registry, promhttp.HandlerOpts{})
	return func(c *gin.Context) { h.ServeHTTP(c.Writer, c.Request) }
}

// observe records metrics and writes one structured access log line per request.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()
	c.Next()
	elapsed := time.Since(start)
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	method := c.Request.Method
	if isHead(c.Request) {
		method = http.MethodHead
	}
	s.metrics.duration.WithLabelValues(method, route, strconv.Itoa(status)).Observe(elapsed.Seconds())
	if route == "/healthz" || route == "/metrics" {
		return
	}
	level := slog.LevelInfo
	attrs := []slog.Attr{
		slog.String("request_id", c.GetString(ctxRequestID)),
		slog.String("method", method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		slog.Int("bytes", c.Writer.Size()),
	}
	if cred, ok := credential(c); ok {
		attrs = append(attrs, slog.Int64("tenant_id", cred.TenantID))
	}
	if v, ok := c.Get(ctxErr); ok {
		if err, ok := v.(error); ok {
			level = slog.LevelError
			attrs = append(attrs, slog.String("error", err.Error()))
		}
	}
	s.d.Logger.LogAttrs(c.Request.Context(), level, "http request", attrs...)
}

// setBodyLimit raises the body cap of one route above the default.
func (s *Server) setBodyLimit(method, route string, n int64) { s.bodyLimits[method+" "+route] = n }

// limitBody caps request bodies: a declared Content-Length over the cap is refused at once with
// 413, and reads past the cap fail with *http.MaxBytesError, which errors.go maps to 413.
func (s *Server) limitBody(c *gin.Context) {
	limit := s.d.MaxBodyBytes
	if n, ok := s.bodyLimits[c.Request.Method+" "+c.FullPath()]; ok {
		limit = n
	}
	if c.Request.ContentLength > limit {
		abort(c, &http.MaxBytesError{Limit: limit})
		return
	}
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	}
	c.Next()
}

func codedNotFound(msg string) error { return errs.Coded(errs.ErrNotFound, "not_found", "%s", msg) }

// headKey marks, in a request's context, a HEAD request the router serves as a GET.
type headKey struct{}

// isHead reports whether the request came as HEAD (edge serves it as GET).
func isHead(r *http.Request) bool { return r.Context().Value(headKey{}) != nil }

// edge is the outermost handler, in front of the router, so that what gin answers itself (its
// trailing-slash redirects) is covered as well as 404s, 405s and every route:
//   - every response carries the request id (a sane X-Request-ID from the caller, else a new
//     one, which the requestID middleware then finds) and X-Content-Type-Options: nosniff;
//   - HEAD is served wherever GET is: the router runs the GET route, the answer keeps its status
//     and headers (Content-Length included) and loses its body.
func (s *Server) edge(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-ID")
	if !requestIDRE.MatchString(id) {
		id = newRequestID()
		r.Header.Set("X-Request-ID", id)
	}
	h := w.Header()
	h.Set("X-Request-ID", id)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodHead {
		s.engine.ServeHTTP(w, r)
		return
	}
	get := r.WithContext(context.WithValue(r.Context(), headKey{}, true))
	get.Method = http.MethodGet
	hw := &headWriter{w: w, status: http.StatusOK}
	s.engine.ServeHTTP(hw, get)
	hw.finish()
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// headWriter answers a HEAD request from a GET handler: it drops the body, counting it, and
// holds the status back until the handler returns (or flushes), so that it can give the answer
// the Content-Length the GET would have had.
type headWriter struct {
	w       http.ResponseWriter
	status  int
	n       int64
	written bool // the status was sent
}

func (h *headWriter) Header() http.Header { return h.w.Header() }

func (h *headWriter) WriteHeader(code int) {
	if h.written {
		return
	}
	if code < 200 { // informational answers pass through and do not end the header
		h.w.WriteHeader(code)
		return
	}
	h.status = code
}

func (h *headWriter) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return len(p), nil
}

// Flush sends the status and headers now (a stream): without a Content-Length.
func (h *headWriter) Flush() {
	h.send()
	if f, ok := h.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (h *headWriter) send() {
	if !h.written {
		h.written = true
		h.w.WriteHeader(h.status)
	}
}

func (h *headWriter) finish() {
	if !h.written && h.n > 0 && h.w.Header().Get("Content-Length") == "" && h.w.Header().Get("Transfer-Encoding") == "" {
		h.w.Header().Set("Content-Length", strconv.FormatInt(h.n, 10))
	}
	h.send()
}

func (h *headWriter) Unwrap() http.ResponseWriter { return h.w }
