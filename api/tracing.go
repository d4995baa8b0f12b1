package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the HTTP server spans.
const tracerName = "github.com/cohort-dev/cohort/api"

// untraced are the routes probes and scrapers call every few seconds: no spans.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// maxTraceState bounds the caller's tracestate header that a request's trace carries on (to the
// bus's message headers and attributes, which have size limits of their own).
const maxTraceState = 512

// edgeCarrier is what the API takes from a caller's trace context: traceparent and a tracestate
// of at most maxTraceState bytes. Baggage is not taken from the public internet: it would
// travel, unchecked, into every message and workflow the request causes.
func edgeCarrier(h http.Header) propagation.MapCarrier {
	m := propagation.MapCarrier{}
	if tp := h.Get("traceparent"); tp != "" {
		m["traceparent"] = tp
		if ts := h.Get("tracestate"); ts != "" && len(ts) <= maxTraceState {
			m["tracestate"] = ts
		}
	}
	return m
}

// tracing starts a server span per request named "METHOD /route/template" (the method alone for
// a path no route matched), continuing the caller's W3C traceparent, and puts it in the
// request's context, where the handlers, GORM/pgx, the bus and Temporal's client pick it up. It
// records the HTTP attributes, the status (an error status for a 5xx), the request id and the
// tenant. The provider is the global one (internal/telemetry.Setup); without an exporter the
// span is a no-op.
func (s *Server) tracing(c *gin.Context) {
	route := c.FullPath()
	if untraced[route] {
		c.Next()
		return
	}
	r := c.Request
	ctx := propagation.TraceContext{}.Extract(r.Context(), edgeCarrier(r.Header))
	name := r.Method
	if route != "" {
		name += " " + route
	}
	ctx, span := otel.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	c.Request = r.WithContext(ctx) // also when not recording: a sampled-out trace still propagates
	if !span.IsRecording() {
		// Tracing off (the default) or sampled out: no attributes to build on the hot path.
		c.Next()
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	span.SetAttributes(
		attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path),
		attribute.String("url.scheme", scheme),
		attribute.String("server.address", r.Host),
		attribute.String("network.protocol.version", strings.TrimPrefix(r.Proto, "HTTP/")),
		attribute.String("client.address", c.ClientIP()),
	)
	if route != "" {
		span.SetAttributes(attribute.String("http.route", route))
	}
	if ua := r.UserAgent(); ua != "" {
		span.SetAttributes(attribute.String("user_agent.original", ua))
	}

	c.Next()

	status := c.Writer.Status()
	span.SetAttributes(
		attribute.Int("http.response.status_code", status),
		attribute.String("cohort.request_id", c.GetString(ctxRequestID)),
	)
	if cred, ok := credential(c); ok {
		span.SetAttributes(attribute.Int64("cohort.tenant_id", cred.TenantID))
	}
	// A 4xx is the caller's: the server span's status stays unset (semantic conventions).
	if status >= http.StatusInternalServerError {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
		if v, ok := c.Get(ctxErr); ok {
			if err, ok := v.(error); ok {
				span.RecordError(err)
			}
		}
	}
}
