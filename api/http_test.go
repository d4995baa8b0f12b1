package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// TestUnknownRouteAndMethod: 404 and 405 come in the error shape; 405 lists the allowed methods.
func TestUnknownRouteAndMethod(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t))
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantCode   string
		wantAllow  string
	}{
		{name: "unknown route", method: http.MethodGet, path: "/no/such/route", wantStatus: http.StatusNotFound, wantCode: "not_found"},
		{name: "unknown api route", method: http.MethodPost, path: "/api/nothing-here/", wantStatus: http.StatusNotFound, wantCode: "not_found"},
		{name: "delete healthz", method: http.MethodDelete, path: "/healthz", wantStatus: http.StatusMethodNotAllowed, wantCode: "method_not_allowed", wantAllow: "GET"},
		{name: "get session handshake", method: http.MethodGet, path: "/api/auth/session/", wantStatus: http.StatusMethodNotAllowed, wantCode: "method_not_allowed", wantAllow: "POST"},
		{name: "post whoami", method: http.MethodPost, path: "/api/auth/whoami/", wantStatus: http.StatusMethodNotAllowed, wantCode: "method_not_allowed", wantAllow: "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := send(t, ts, tt.method, tt.path, nil, nil)
			if r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			if e := errorBody(t, r); e.Code != tt.wantCode {
				t.Errorf("code %q, want %q", e.Code, tt.wantCode)
			}
			if tt.wantAllow != "" && !strings.Contains(r.Header.Get("Allow"), tt.wantAllow) {
				t.Errorf("Allow %q, want it to list %s", r.Header.Get("Allow"), tt.wantAllow)
			}
		})
	}
}

// TestRequestID: a sane X-Request-ID is echoed (and used in error bodies); anything else is
// replaced by a generated one.
func TestRequestID(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t))
	generated := regexp.MustCompile(`^[0-9a-f]{24}$`)
	tests := []struct {
		name string
		sent string
		echo bool
	}{
		{name: "sane", sent: "req-123_abc.DEF:9", echo: true},
		{name: "uuid", sent: "4f1c2a9e-0b7d-4c53-9a52-2f1e8d3b6c10", echo: true},
		{name: "128 chars", sent: strings.Repeat("a", 128), echo: true},
		{name: "129 chars", sent: strings.Repeat("a", 129)},
		{name: "500 chars", sent: strings.Repeat("b", 500)},
		{name: "space", sent: "has space"},
		{name: "markup", sent: "<script>alert(1)</script>"},
		{name: "quote", sent: `a"b`},
		{name: "none", sent: ""},
	}
	for _, tt := range tests {
		for _, path := range []string{"/healthz", "/no/such/route"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				h := http.Header{}
				if tt.sent != "" {
					h.Set("X-Request-ID", tt.sent)
				}
				r := send(t, ts, http.MethodGet, path, h, nil)
				got := r.Header.Get("X-Request-ID")
				if tt.echo && got != tt.sent {
					t.Fatalf("X-Request-ID %q, want the caller's %q", got, tt.sent)
				}
				if !tt.echo && (got == tt.sent || !generated.MatchString(got)) {
					t.Fatalf("X-Request-ID %q for %q: want a fresh generated id", got, tt.sent)
				}
				if r.Status == http.StatusNotFound {
					errorBody(t, r) // checks request_id == header
				}
			})
		}
	}
	t.Run("fresh per request", func(t *testing.T) {
		a := send(t, ts, http.MethodGet, "/healthz", nil, nil).Header.Get("X-Request-ID")
		b := send(t, ts, http.MethodGet, "/healthz", nil, nil).Header.Get("X-Request-ID")
		if a == b {
			t.Fatalf("two requests got the same generated id %q", a)
		}
	})
}

// TestHealthAndReadiness: /healthz is liveness; /readyz runs every ReadyCheck with a 2 s budget
// and names the failing one.
func TestHealthAndReadiness(t *testing.T) {
	f := newFixture(t)
	t.Run("healthz", func(t *testing.T) {
		ts := serve(t, f.newServer(t))
		r := send(t, ts, http.MethodGet, "/healthz", nil, nil)
		if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"ok"`)) {
			t.Fatalf("healthz %d %s", r.Status, r.Body)
		}
	})

	ok := func(context.Context) error { return nil }
	postgres := ReadyCheck{Name: "postgres", Check: f.db.Ping}
	tests := []struct {
		name       string
		checks     []ReadyCheck
		wantStatus int
		wantChecks map[string]string // name -> "ok" or "!ok" (any error text)
		minTime    time.Duration
		maxTime    time.Duration
	}{
		{name: "no checks", wantStatus: http.StatusOK, wantChecks: map[string]string{}},
		{name: "all ok", checks: []ReadyCheck{postgres, {Name: "temporal", Check: ok}}, wantStatus: http.StatusOK,
			wantChecks: map[string]string{"postgres": "ok", "temporal": "ok"}},
		{name: "one failing", checks: []ReadyCheck{postgres, {Name: "temporal", Check: func(context.Context) error { return errors.New("connection refused") }}},
			wantStatus: http.StatusServiceUnavailable, wantChecks: map[string]string{"postgres": "ok", "temporal": "!ok"}},
		{name: "one blocking is cut off at 2s", checks: []ReadyCheck{postgres, {Name: "temporal", Check: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}}}, wantStatus: http.StatusServiceUnavailable, wantChecks: map[string]string{"postgres": "ok", "temporal": "!ok"},
			minTime: 1900 * time.Millisecond, maxTime: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := serve(t, f.newServer(t, func(d *Deps) { d.Ready = tt.checks }))
			start := time.Now()
			r := send(t, ts, http.MethodGet, "/readyz", nil, nil)
			elapsed := time.Since(start)
			if r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			if elapsed < tt.minTime || (tt.maxTime > 0 && elapsed > tt.maxTime) {
				t.Errorf("answered after %s, want within [%s, %s]", elapsed, tt.minTime, tt.maxTime)
			}
			var got readyResponse
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatalf("body %s: %v", r.Body, err)
			}
			wantOverall := "ok"
			if tt.wantStatus != http.StatusOK {
				wantOverall = "unavailable"
			}
			if got.Status != wantOverall {
				t.Errorf("status field %q, want %q", got.Status, wantOverall)
			}
			if len(got.Checks) != len(tt.wantChecks) {
				t.Errorf("checks %v, want %v", got.Checks, tt.wantChecks)
			}
			for name, want := range tt.wantChecks {
				v, present := got.Checks[name]
				switch {
				case !present:
					t.Errorf("check %q missing from %v", name, got.Checks)
				case want == "ok" && v != "ok", want == "!ok" && (v == "ok" || v == ""):
					t.Errorf("check %q = %q, want %s", name, v, want)
				}
			}
		})
	}
}

// scrapeMetrics returns the Prometheus text of /metrics.
func scrapeMetrics(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	r := send(t, ts, http.MethodGet, "/metrics", nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics %d", r.Status)
	}
	return string(r.Body)
}

// metricValue finds "<name>{<labels...>} value" (labels matched as substrings) and returns value.
func metricValue(text, name string, labels ...string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// TestMetrics: request latency is exported by route template and status, unmatched paths share
// one label value.
func TestMetrics(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Registry = prometheus.NewRegistry() }))
	send(t, ts, http.MethodGet, "/healthz", nil, nil)
	send(t, ts, http.MethodGet, "/api/auth/whoami/", hdr("Authorization", "ApiKey "+f.A.SK), nil)
	send(t, ts, http.MethodGet, "/api/auth/whoami/", nil, nil)
	send(t, ts, http.MethodGet, "/no/such/route-a1b2c3", nil, nil)
	text := scrapeMetrics(t, ts)
	tests := []struct {
		name   string
		labels []string
	}{
		{name: "healthz 200", labels: []string{`method="GET"`, `route="/healthz"`, `status="200"`}},
		{name: "whoami 200 by template", labels: []string{`route="/api/auth/whoami/"`, `status="200"`}},
		{name: "whoami 401", labels: []string{`route="/api/auth/whoami/"`, `status="401"`}},
		{name: "unmatched", labels: []string{`route="unmatched"`, `status="404"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := metricValue(text, "cohort_http_request_duration_seconds_count", tt.labels...)
			if !ok || v < 1 {
				t.Fatalf("cohort_http_request_duration_seconds_count%v = %v (found %v) in:\n%s", tt.labels, v, ok, text)
			}
		})
	}
	if strings.Contains(text, "route-a1b2c3") {
		t.Error("an unmatched raw path leaked into metric labels")
	}
	if _, ok := metricValue(text, "cohort_http_requests_in_flight"); !ok {
		t.Error("cohort_http_requests_in_flight is not exported")
	}
}

// mountPanic registers GET /__probe/panic, which panics.
func mountPanic(s *Server) string {
	s.engine.GET("/__probe/panic", func(*gin.Context) { panic("probe panic") })
	return "/__probe/panic"
}

// TestPanicRecovered: a handler panic becomes a 500 in the error shape and the server keeps
// serving.
func TestPanicRecovered(t *testing.T) {
	f := newFixture(t)
	s := f.newServer(t)
	path := mountPanic(s)
	ts := serve(t, s)
	for i := range 3 {
		r := send(t, ts, http.MethodGet, path, hdr("X-Request-ID", "panic-"+strconv.Itoa(i)), nil)
		if r.Status != http.StatusInternalServerError {
			t.Fatalf("status %d, want 500; body %s", r.Status, r.Body)
		}
		e := errorBody(t, r)
		if e.Code != "internal" || strings.Contains(e.Message, "probe panic") {
			t.Errorf("error %+v: want code internal without the panic value", e)
		}
		if e.RequestID != "panic-"+strconv.Itoa(i) {
			t.Errorf("request_id %q", e.RequestID)
		}
		if h := send(t, ts, http.MethodGet, "/healthz", nil, nil); h.Status != http.StatusOK {
			t.Fatalf("after a panic /healthz answers %d", h.Status)
		}
	}
}

// TestPanicObserved: a request that panicked is still measured like any other 500, and leaves the
// in-flight gauge where it was. (The observe middleware runs inside recover without a defer, so
// a panic skips its bookkeeping; see the report.)
func TestPanicObserved(t *testing.T) {
	f := newFixture(t)
	s := f.newServer(t, func(d *Deps) { d.Registry = prometheus.NewRegistry() })
	path := mountPanic(s)
	ts := serve(t, s)
	for range 3 {
		send(t, ts, http.MethodGet, path, nil, nil)
	}
	text := scrapeMetrics(t, ts)
	t.Run("in-flight gauge back to the scrape itself", func(t *testing.T) {
		v, ok := metricValue(text, "cohort_http_requests_in_flight")
		if !ok || v != 1 {
			t.Errorf("cohort_http_requests_in_flight = %v after 3 panicked requests and during one scrape, want 1", v)
		}
	})
	t.Run("500s of panics are counted", func(t *testing.T) {
		v, ok := metricValue(text, "cohort_http_request_duration_seconds_count", `route="/__probe/panic"`, `status="500"`)
		if !ok || v != 3 {
			t.Errorf("cohort_http_request_duration_seconds_count{route=\"/__probe/panic\",status=\"500\"} = %v (found %v), want 3", v, ok)
		}
	})
}
