package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSDKBundleServed(t *testing.T) {
	script := []byte("var Cohort=(()=>{/* bundle */})();\n")
	h := New(Deps{SDK: &SDKBundle{Version: "1.2.3", Script: script}}).Handler()
	get := func(path string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	w := get("/sdk/v1/cohort.min.js", nil)
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), script) {
		t.Fatalf("v1: %d %q", w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "public, max-age=86400, stale-while-revalidate=604800" {
		t.Errorf("v1 cache control %q", cc)
	}
	etag := w.Header().Get("ETag")
	if etag == "" || w.Header().Get("Cross-Origin-Resource-Policy") != "cross-origin" {
		t.Errorf("headers %v", w.Header())
	}

	if w := get("/sdk/v1.2.3/cohort.min.js", nil); w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Errorf("exact version: %d %q", w.Code, w.Header().Get("Cache-Control"))
	}
	for _, p := range []string{"/sdk/v2/cohort.min.js", "/sdk/v1.2.4/cohort.min.js", "/sdk/latest/cohort.min.js"} {
		if w := get(p, nil); w.Code != http.StatusNotFound || !bytes.Contains(w.Body.Bytes(), []byte(`"code":"not_found"`)) {
			t.Errorf("%s: %d %s", p, w.Code, w.Body.String())
		}
	}

	if w := get("/sdk/v1/cohort.min.js", map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("revalidation: %d, %d bytes", w.Code, w.Body.Len())
	}

	w = get("/sdk/v1/cohort.min.js", map[string]string{"Accept-Encoding": "br, gzip"})
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip: %v", w.Header())
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(zr); !bytes.Equal(got, script) {
		t.Errorf("gzip body %q", got)
	}
	if w := get("/sdk/v1/cohort.min.js", map[string]string{"Accept-Encoding": "gzip;q=0"}); w.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 answered with %q", w.Header().Get("Content-Encoding"))
	}
}

func TestSDKRoutesWithoutBundle(t *testing.T) {
	for _, d := range []Deps{{}, {SDK: &SDKBundle{Version: "1.0.0"}}} {
		w := httptest.NewRecorder()
		New(d).Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/sdk/v1/cohort.min.js", nil))
		if w.Code != http.StatusNotFound {
			t.Fatalf("%d", w.Code)
		}
	}
}
