package api

import (
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cohort-dev/cohort/internal/testenv"
)

func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// serverSpan finds the one server span named name.
func serverSpan(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer && s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("%d server spans named %q; spans: %v", len(found), name, names)
	}
	return found[0]
}

// A request through the real router over a real Postgres gets a server span named by its route,
// with the database queries it made as child client spans in the same trace; a caller's
// traceparent is continued; probes are not traced.
func TestTracingServerSpanWithPgxChild(t *testing.T) {
	f := newFixture(t)
	rec := testenv.RecordSpans(t)
	ts := serve(t, f.newServer(t))

	// The handshake looks the public key up in Postgres (a fresh authenticator: no cache).
	r := send(t, ts, http.MethodPost, "/api/auth/session/", hdr("Authorization", "ApiKey "+f.A.PK), strings.NewReader(`{"user_id":"u-1"}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("handshake: %d %s", r.Status, r.Body)
	}
	spans := rec.Ended()
	srv := serverSpan(t, spans, "POST /api/auth/session/")
	if srv.Parent().IsValid() {
		t.Errorf("a request without traceparent should start a trace, got parent %v", srv.Parent())
	}
	for key, want := range map[string]any{
		"http.request.method":       "POST",
		"http.route":                "/api/auth/session/",
		"url.path":                  "/api/auth/session/",
		"http.response.status_code": int64(http.StatusCreated),
		"cohort.tenant_id":          f.A.T.ID,
		"cohort.request_id":         r.Header.Get("X-Request-ID"),
	} {
		v, ok := spanAttr(srv, key)
		if !ok || v.AsInterface() != want {
			t.Errorf("server span %s = %v (set %v), want %v", key, v.AsInterface(), ok, want)
		}
	}
	var queries []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if v, ok := spanAttr(s, "db.system"); ok && v.AsString() == "postgresql" && s.Parent().SpanID() == srv.SpanContext().SpanID() {
			queries = append(queries, s)
		}
	}
	if len(queries) == 0 {
		t.Fatalf("no pgx span under the server span %s", srv.SpanContext().SpanID())
	}
	q := queries[0]
	if q.SpanContext().TraceID() != srv.SpanContext().TraceID() {
		t.Errorf("pgx span trace %s != server trace %s", q.SpanContext().TraceID(), srv.SpanContext().TraceID())
	}
	if q.SpanKind() != trace.SpanKindClient {
		t.Errorf("pgx span kind %v, want client", q.SpanKind())
	}
	stmt, _ := spanAttr(q, "db.statement")
	if !strings.Contains(stmt.AsString(), "$1") || strings.Contains(stmt.AsString(), f.A.PKID) {
		t.Errorf("db.statement %q: want the parameterised text without argument values", stmt.AsString())
	}
	if !strings.HasPrefix(q.Name(), "SELECT ") {
		t.Errorf("pgx span name %q, want SELECT <database>", q.Name())
	}

	// An incoming W3C traceparent is continued: same trace id, the caller's span as parent.
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h := hdr("Authorization", "ApiKey "+f.B.PK, "traceparent", "00-"+traceID+"-"+parentID+"-01",
		"tracestate", "vendor=abc", "baggage", "secret=not-taken")
	r = send(t, ts, http.MethodPost, "/api/auth/session/", h, strings.NewReader(`{"user_id":"u-2"}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("handshake with traceparent: %d %s", r.Status, r.Body)
	}
	var cont sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer && s.SpanContext().TraceID().String() == traceID {
			cont = s
		}
	}
	if cont == nil {
		t.Fatalf("no server span continues trace %s", traceID)
	}
	if got := cont.Parent().SpanID().String(); got != parentID || !cont.Parent().IsRemote() {
		t.Errorf("continued span's parent %s (remote %v), want the caller's %s", got, cont.Parent().IsRemote(), parentID)
	}
	if got := cont.Parent().TraceState().Get("vendor"); got != "abc" {
		t.Errorf("tracestate vendor=%q, want abc", got)
	}
	children := 0
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == cont.SpanContext().SpanID() && s.SpanContext().TraceID().String() == traceID {
			children++
		}
	}
	if children == 0 {
		t.Error("the continued request's queries are not in the caller's trace")
	}

	// Errors: a 4xx leaves the status unset, unmatched paths are named by method only; probes
	// make no spans.
	before := len(rec.Ended())
	if r := send(t, ts, http.MethodGet, "/healthz", nil, nil); r.Status != http.StatusOK {
		t.Fatalf("healthz: %d", r.Status)
	}
	if n := len(rec.Ended()); n != before {
		t.Errorf("/healthz made %d spans", n-before)
	}
	if r := send(t, ts, http.MethodGet, "/no/such/route", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("unmatched: %d", r.Status)
	}
	nf := serverSpan(t, rec.Ended()[before:], "GET")
	if v, _ := spanAttr(nf, "http.response.status_code"); v.AsInt64() != http.StatusNotFound {
		t.Errorf("unmatched status attribute %v", v.AsInterface())
	}
	if nf.Status().Code != 0 {
		t.Errorf("a 404 set the span status %v", nf.Status())
	}
}

// The caller's trace context is taken within bounds, and baggage not at all.
func TestTracingEdgeCarrier(t *testing.T) {
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name string
		h    http.Header
		want map[string]string
	}{
		{"none", hdr(), map[string]string{}},
		{"traceparent and tracestate", hdr("traceparent", tp, "tracestate", "a=b"), map[string]string{"traceparent": tp, "tracestate": "a=b"}},
		{"oversized tracestate dropped", hdr("traceparent", tp, "tracestate", "a="+strings.Repeat("x", maxTraceState)), map[string]string{"traceparent": tp}},
		{"baggage ignored", hdr("traceparent", tp, "baggage", "k=v"), map[string]string{"traceparent": tp}},
		{"tracestate alone ignored", hdr("tracestate", "a=b"), map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := edgeCarrier(tc.h)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
