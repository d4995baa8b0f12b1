package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/pagehost"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// hostedStandInBundle stands in for the client library's browser bundle: the global the tracking
// snippet calls, whose trackPageView sends one request with the key.
const hostedStandInBundle = `window.Cohort = { Client: function (o) {
  this.trackPageView = function () {
    return fetch(o.apiUrl + "/api/test-track", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ apiKey: o.apiKey }) }).then(function (r) { return r.text(); });
  };
} };`

// TestHostedPageRendersInChromium opens a hosted page (hostile text in its title and a product
// name, images from the server) in Debian's Chromium under the Content-Security-Policy it is
// served with: no console or page error, no failed request, every block visible, no hostile
// text ran, and the tracking snippet sent its request with the tenant's public key.
func TestHostedPageRendersInChromium(t *testing.T) {
	testenv.NodeTools(t)
	sdk := testenv.SDKDir(t)
	for _, p := range []string{filepath.Join(sdk, "node_modules", "playwright-core", "package.json"), "/usr/bin/chromium"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: %v", p, err)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	svc := page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{})
	hosted := pagehost.New(pagehost.Deps{Pages: svc, Keys: pageexport.NewKeys(f.db.Pool, time.Now)})
	router := f.newServer(t, func(d *Deps) { d.Pages = &PagesDeps{Service: svc, Hosted: hosted} }).Handler()

	var mu sync.Mutex
	var tracked []string
	mux := http.NewServeMux()
	mux.Handle("/", router)
	mux.HandleFunc("GET "+pageexport.ScriptPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(hostedStandInBundle))
	})
	mux.HandleFunc("POST /api/test-track", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			APIKey string `json:"apiKey"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		tracked = append(tracked, body.APIKey)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("GET /img/p.png", func(w http.ResponseWriter, r *http.Request) {
		// a 1x1 PNG
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"))
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ts := httptest.NewServer(mux)
	defer ts.Close()

	testenv.Exec(t, f.db, `INSERT INTO product_schemas (tenant_id, default_currency) VALUES ($1, 'EUR')`, f.A.T.ID)
	testenv.Exec(t, f.db, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES
		($1, 'LIN-1', '<img src=x onerror="window.__pwned=1">', 'lin-1', 'linen dress', jsonb_build_object('price', 79, 'image_url', $2::text))`,
		f.A.T.ID, ts.URL+"/img/p.png")
	e := &pagesEnv{f: f, ts: ts, svc: svc}
	q := e.query(t, f.A, `{"text":"linen dresses"}`)
	pub := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"slug":"linen","published":true}`, q.ID))
	e.generate(t, f.A.T.ID, pub.ID, "Linen", "LIN-1")
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A),
		`{"title":"Linen </script><script>window.__pwned=2</script>"}`), http.StatusOK, nil)

	shot := filepath.Join(t.TempDir(), "hosted.png")
	out := testenv.RunBrowserScript(t, node, "/usr/bin/chromium", sdk, filepath.Join("..", "internal", "pageexport", "testdata", "render_html.mjs"), ts.URL+"/p/"+f.A.T.Slug+"/linen", shot)
	var rep struct {
		ConsoleErrors  []string `json:"consoleErrors"`
		PageErrors     []string `json:"pageErrors"`
		FailedRequests []string `json:"failedRequests"`
		Blocks         []struct {
			Type    string `json:"type"`
			Visible bool   `json:"visible"`
		} `json:"blocks"`
		Tracked bool `json:"tracked"`
		Pwned   any  `json:"pwned"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	if len(rep.ConsoleErrors) > 0 || len(rep.PageErrors) > 0 || len(rep.FailedRequests) > 0 {
		t.Errorf("console errors %q, page errors %q, failed requests %q", rep.ConsoleErrors, rep.PageErrors, rep.FailedRequests)
	}
	if rep.Pwned != nil {
		t.Errorf("hostile text ran: window.__pwned = %v", rep.Pwned)
	}
	if len(rep.Blocks) != 2 {
		t.Errorf("blocks %+v", rep.Blocks)
	}
	for _, b := range rep.Blocks {
		if !b.Visible {
			t.Errorf("block %s not visible", b.Type)
		}
	}
	mu.Lock()
	got := tracked
	mu.Unlock()
	if !rep.Tracked || len(got) != 1 || len(got[0]) < 4 || got[0][:3] != "pk_" {
		t.Errorf("tracking: sent %v, keys received %q", rep.Tracked, got)
	}
}
