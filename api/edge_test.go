package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
)

// noRedirect sends one request without following redirects.
func noRedirect(t *testing.T, method, url string, h http.Header) result {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return result{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestEveryAnswerHasRequestIDAndNosniff: routes, the router's own trailing-slash redirects, 404s
// of unknown routes, 405s and HEADs all carry the request id (the caller's when sane) and
// X-Content-Type-Options: nosniff.
func TestEveryAnswerHasRequestIDAndNosniff(t *testing.T) {
	e := pagesServer(t, page.Options{})
	ts := serve(t, e.f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: e.svc}
		d.SDK = &SDKBundle{Version: "1.0.0", Script: []byte("var Cohort={};\n")}
	}))
	for _, tc := range []struct {
		name, method, path string
		status             int
	}{
		{"route", http.MethodGet, "/healthz", http.StatusOK},
		{"sdk bundle", http.MethodGet, "/sdk/v1/cohort.min.js", http.StatusOK},
		{"trailing-slash redirect", http.MethodGet, "/api/auth/whoami", http.StatusMovedPermanently},
		{"trailing-slash redirect of a public page", http.MethodGet, "/api/ai-pages/public/pages/tenant-a/nothing", http.StatusMovedPermanently},
		{"unknown route", http.MethodGet, "/no/such/route", http.StatusNotFound},
		{"method not allowed", http.MethodDelete, "/healthz", http.StatusMethodNotAllowed},
		{"head of an unknown route", http.MethodHead, "/no/such/route", http.StatusNotFound},
		{"unauthenticated", http.MethodGet, "/api/auth/whoami/", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sent := range []string{"", "probe-123"} {
				h := http.Header{}
				if sent != "" {
					h.Set("X-Request-ID", sent)
				}
				r := noRedirect(t, tc.method, ts.URL+tc.path, h)
				if r.Status != tc.status {
					t.Fatalf("status %d, want %d; body %s", r.Status, tc.status, r.Body)
				}
				id := r.Header.Get("X-Request-ID")
				if id == "" || (sent != "" && id != sent) {
					t.Errorf("X-Request-ID %q (sent %q)", id, sent)
				}
				if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
					t.Errorf("X-Content-Type-Options %q", got)
				}
				if r.Status >= 400 && tc.method != http.MethodHead {
					errorBody(t, r)
				}
			}
		})
	}
}

// TestHeadWhereverGet: HEAD answers like GET (status and headers, Content-Length included)
// without a body, on the public page, the SDK bundle and any other GET route; it is never a 405.
func TestHeadWhereverGet(t *testing.T) {
	e := pagesServer(t, page.Options{})
	ts := serve(t, e.f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: e.svc}
		d.SDK = &SDKBundle{Version: "1.0.0", Script: []byte("var Cohort={Client:function(){}};\n")}
	}))
	q := e.query(t, e.f.A, `{"text":"linen dresses"}`)
	pub := e.page(t, e.f.A, fmt.Sprintf(`{"query":%d,"published":true,"slug":"linen"}`, q.ID))
	e.generate(t, e.f.A.T.ID, pub.ID, "Linen")
	for _, path := range []string{
		"/api/ai-pages/public/pages/" + e.f.A.T.Slug + "/linen/",
		"/sdk/v1/cohort.min.js",
		"/sdk/v1.0.0/cohort.min.js",
		"/healthz",
		"/openapi.yaml",
	} {
		t.Run(path, func(t *testing.T) {
			get := noRedirect(t, http.MethodGet, ts.URL+path, nil)
			head := noRedirect(t, http.MethodHead, ts.URL+path, nil)
			if get.Status != http.StatusOK || head.Status != http.StatusOK {
				t.Fatalf("GET %d, HEAD %d: %s", get.Status, head.Status, head.Body)
			}
			if len(head.Body) != 0 {
				t.Errorf("HEAD has a body of %d bytes", len(head.Body))
			}
			for _, name := range []string{"Content-Type", "Cache-Control", "ETag", "X-Content-Type-Options"} {
				if head.Header.Get(name) != get.Header.Get(name) {
					t.Errorf("%s: HEAD %q, GET %q", name, head.Header.Get(name), get.Header.Get(name))
				}
			}
			if cl := head.Header.Get("Content-Length"); cl != fmt.Sprint(len(get.Body)) && !strings.HasPrefix(path, "/api/ai-pages/public/") {
				t.Errorf("HEAD Content-Length %q, GET body %d bytes", cl, len(get.Body))
			}
		})
	}
	// HEAD where only POST is served is still a 405 that lists the allowed method.
	r := noRedirect(t, http.MethodHead, ts.URL+"/api/auth/session/", nil)
	if r.Status != http.StatusMethodNotAllowed || !strings.Contains(r.Header.Get("Allow"), "POST") {
		t.Errorf("HEAD of a POST route: %d, Allow %q", r.Status, r.Header.Get("Allow"))
	}
}

// TestHeadCountsNoView: a HEAD of the public page checks it without anybody reading it, so it
// counts no view (and no crawl); the GETs around it count one each.
func TestHeadCountsNoView(t *testing.T) {
	e := pagesServer(t, page.Options{})
	ts := serve(t, e.f.newServer(t, func(d *Deps) { d.Pages = &PagesDeps{Service: e.svc} }))
	q := e.query(t, e.f.A, `{"text":"linen dresses"}`)
	pub := e.page(t, e.f.A, fmt.Sprintf(`{"query":%d,"published":true,"slug":"linen"}`, q.ID))
	e.generate(t, e.f.A.T.ID, pub.ID, "Linen")
	url := ts.URL + "/api/ai-pages/public/pages/" + e.f.A.T.Slug + "/linen/"
	views := func() int64 {
		t.Helper()
		r := noRedirect(t, http.MethodGet, url, nil)
		var body struct {
			ViewCount int64 `json:"view_count"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
			t.Fatalf("GET %d: %s", r.Status, r.Body)
		}
		return body.ViewCount
	}
	before := views()
	for range 3 {
		if r := noRedirect(t, http.MethodHead, url, http.Header{"User-Agent": {"GPTBot/1.0"}}); r.Status != http.StatusOK {
			t.Fatalf("HEAD %d", r.Status)
		}
	}
	if after := views(); after != before+1 {
		t.Errorf("view_count %d after a GET, 3 HEADs and a GET (was %d): HEADs were counted", after, before)
	}
}
