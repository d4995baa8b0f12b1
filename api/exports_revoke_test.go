package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// readyExport requests an export of the page in format, builds it and returns its download link
// (a path on the API) and its id.
func readyExport(t *testing.T, e *pagesEnv, svc *pageexport.Service, c tenantCreds, pageID int64, format string) (string, int64) {
	t.Helper()
	path := "/api/ai-pages/pages/" + strconv.FormatInt(pageID, 10) + "/export/"
	var started pageexport.Started
	ok(t, jsonCall(t, e.ts, http.MethodPost, path, bearer(c), `{"format":"`+format+`"}`), http.StatusAccepted, &started)
	if _, err := svc.Build(context.Background(), c.T.ID, started.ExportID); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	ok(t, jsonCall(t, e.ts, http.MethodGet, path+"?export_id="+strconv.FormatInt(started.ExportID, 10), bearer(c), ""), http.StatusOK, &got)
	link, _ := got["download_url"].(string)
	if link == "" {
		t.Fatalf("no link: %v", got)
	}
	return strings.TrimPrefix(link, "http://cohort.test"), started.ExportID
}

func exportsServer(t *testing.T) (*pagesEnv, *pageexport.Service) {
	t.Helper()
	e := pagesServer(t, page.Options{})
	svc := pageexport.NewService(pageexport.Deps{Pool: e.f.db.Pool, Pages: e.svc, Keys: pageexport.NewKeys(e.f.db.Pool, nil),
		Blob: e.f.blob, Starter: &syncExportStarter{}, Now: e.f.blobClock.Now})
	e.ts = serve(t, e.f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: e.svc}
		d.Exports = &ExportsDeps{Service: svc, PublicURL: "https://api.cohort.test"}
	}))
	return e, svc
}

// TestExportLinksRevokedWithPage: deleting a page revokes the download links of its exports at
// once, not 24 hours later: the files are deleted from the blob store (which is what revokes a
// GCS signed URL), and a link of the local store answers 404 in the error shape once its export
// is gone, even while its file is still there. Another tenant cannot delete the page.
func TestExportLinksRevokedWithPage(t *testing.T) {
	e, svc := exportsServer(t)
	a, b := e.f.A, e.f.B
	q := e.query(t, a, `{"text":"linen dresses"}`)
	p := e.page(t, a, `{"query":`+strconv.FormatInt(q.ID, 10)+`,"slug":"linen"}`)
	e.generate(t, a.T.ID, p.ID, "Linen")
	htmlLink, _ := readyExport(t, e, svc, a, p.ID, "html")
	zipLink, zipID := readyExport(t, e, svc, a, p.ID, "zip")
	for _, l := range []string{htmlLink, zipLink} {
		if r := send(t, e.ts, http.MethodGet, l, nil, nil); r.Status != http.StatusOK {
			t.Fatalf("download before the delete: %d %s", r.Status, r.Body)
		}
	}
	key := func(link string) string {
		k, _, _ := strings.Cut(strings.TrimPrefix(link, "/api/blobs/"), "?")
		return k
	}

	// An export whose record is gone: its link is refused although its file is still stored.
	testenv.Exec(t, e.f.db, `DELETE FROM page_exports WHERE tenant_id = $1 AND id = $2`, a.T.ID, zipID)
	if _, err := e.f.blob.Stat(context.Background(), key(zipLink)); err != nil {
		t.Fatalf("the zip's file: %v", err)
	}
	if r := send(t, e.ts, http.MethodGet, zipLink, nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("link of a deleted export: %d", r.Status)
	} else {
		errorBody(t, r)
	}

	pagePath := "/api/ai-pages/pages/" + strconv.FormatInt(p.ID, 10) + "/"
	ok(t, send(t, e.ts, http.MethodDelete, pagePath, bearer(b), nil), http.StatusNotFound, nil)
	if r := send(t, e.ts, http.MethodGet, htmlLink, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("another tenant's delete revoked the link: %d", r.Status)
	}
	ok(t, send(t, e.ts, http.MethodDelete, pagePath, bearer(a), nil), http.StatusNoContent, nil)
	for _, head := range []bool{false, true} {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		r := send(t, e.ts, method, htmlLink, nil, nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("%s of a deleted page's export link: %d %.200s", method, r.Status, r.Body)
		}
		if !head {
			errorBody(t, r)
		}
	}
	if _, err := e.f.blob.Stat(context.Background(), key(htmlLink)); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("the deleted page's export file is still stored: %v", err)
	}
}

// TestHTMLExportDownloadCSP: an HTML export is downloaded with a restrictive
// Content-Security-Policy that still lets its tracking snippet run: the inline snippet by its
// hash (no 'unsafe-inline' for scripts), the client library and its requests from the API origin
// only, no plugins, frames, forms or base URL.
func TestHTMLExportDownloadCSP(t *testing.T) {
	e, svc := exportsServer(t)
	a := e.f.A
	q := e.query(t, a, `{"text":"linen dresses"}`)
	p := e.page(t, a, `{"query":`+strconv.FormatInt(q.ID, 10)+`,"slug":"linen"}`)
	e.generate(t, a.T.ID, p.ID, "Linen <script>alert(1)</script>")
	link, _ := readyExport(t, e, svc, a, p.ID, "html")
	r := send(t, e.ts, http.MethodGet, link, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("download: %d %s", r.Status, r.Body)
	}
	csp := r.Header.Get("Content-Security-Policy")
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	doc, err := html.Parse(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "script" && n.FirstChild != nil {
			scripts = append(scripts, n.FirstChild.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	if len(scripts) != 1 {
		t.Fatalf("%d inline scripts", len(scripts))
	}
	sum := sha256.Sum256([]byte(scripts[0]))
	hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	for name, want := range map[string]string{
		"default-src":     "'none'",
		"script-src":      hash + " https://api.cohort.test",
		"connect-src":     "https://api.cohort.test",
		"base-uri":        "'none'",
		"form-action":     "'none'",
		"frame-ancestors": "'none'",
		"object-src":      "'none'",
	} {
		if directives[name] != want {
			t.Errorf("%s %q, want %q (CSP %q)", name, directives[name], want, csp)
		}
	}
	if strings.Contains(directives["script-src"], "unsafe") {
		t.Errorf("script-src %q", directives["script-src"])
	}
	if !strings.Contains(string(r.Body), `data-cohort-api="https://api.cohort.test"`) || !strings.Contains(string(r.Body), `data-cohort-key="pk_`) {
		t.Errorf("the snippet's settings are missing: %.2000s", r.Body)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
	// Other formats are not HTML documents: no CSP needed, but still nosniff.
	jsonLink, _ := readyExport(t, e, svc, a, p.ID, "json")
	if r := send(t, e.ts, http.MethodGet, jsonLink, nil, nil); r.Status != http.StatusOK || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("json download: %d %v", r.Status, r.Header)
	}
}
