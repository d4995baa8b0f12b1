package pageexport

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// standInBundle stands in for the client library's browser bundle (sdk/js/dist/cohort.min.js):
// the same global, Cohort.Client, whose trackPageView sends one request to the API with the key.
const standInBundle = `window.Cohort = { Client: function (o) {
  this.trackPageView = function () {
    return fetch(o.apiUrl + "/api/test-track", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ apiKey: o.apiKey, type: "page", url: location.href }) }).then(function (r) { return r.text(); });
  };
} };`

type chromiumReport struct {
	ConsoleErrors  []string `json:"consoleErrors"`
	PageErrors     []string `json:"pageErrors"`
	FailedRequests []string `json:"failedRequests"`
	Blocks         []struct {
		Type    string  `json:"type"`
		Width   float64 `json:"width"`
		Height  float64 `json:"height"`
		Visible bool    `json:"visible"`
	} `json:"blocks"`
	Tracked bool   `json:"tracked"`
	Pwned   any    `json:"pwned"`
	Primary string `json:"primary"`
}

// TestHTMLRendersInChromium opens the HTML export of a page with every block type and hostile
// text in every prop in Debian's headless Chromium: no console or page errors, every block
// visible, none of the hostile text ran, the design tokens apply, the tracking snippet loaded the
// bundle from the API and sent its request with the tenant's key, all under the
// Content-Security-Policy HTML exports are downloaded with; a screenshot is kept.
func TestHTMLRendersInChromium(t *testing.T) {
	testenv.NodeTools(t) // installs sdk/js's npm packages, playwright-core among them
	sdk := testenv.SDKDir(t)
	requireTool(t, filepath.Join(sdk, "node_modules", "playwright-core", "package.json"), "playwright-core")
	chromium := "/usr/bin/chromium"
	requireTool(t, chromium, "Chromium (Debian's chromium package)")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is missing: %v", err)
	}

	var mu sync.Mutex
	var tracked []string
	var exported []byte
	var base string // the test server's origin, set once it runs
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", HTML.ContentType())
		// The policy the API downloads HTML exports with: a violation is a console error.
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy(base))
		_, _ = w.Write(exported)
	})
	mux.HandleFunc("GET "+ScriptPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(standInBundle))
	})
	mux.HandleFunc("GET /img/p.png", func(w http.ResponseWriter, r *http.Request) {
		img := image.NewRGBA(image.Rect(0, 0, 8, 8))
		for i := range img.Pix {
			img.Pix[i] = 200
		}
		img.Set(0, 0, color.Black)
		w.Header().Set("Content-Type", "image/png")
		_ = png.Encode(w, img)
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
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ts := httptest.NewServer(mux)
	defer ts.Close()
	base = ts.URL

	c := fullContent(hostile, ts.URL)
	if exported, err = RenderHTML(c); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "export.png")
	out := testenv.RunBrowserScript(t, node, chromium, sdk, filepath.Join("testdata", "render_html.mjs"), ts.URL+"/page.html", shot)
	var rep chromiumReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	if len(rep.ConsoleErrors) > 0 || len(rep.PageErrors) > 0 || len(rep.FailedRequests) > 0 {
		t.Errorf("console errors %q, page errors %q, failed requests %q", rep.ConsoleErrors, rep.PageErrors, rep.FailedRequests)
	}
	if rep.Pwned != nil {
		t.Errorf("hostile text ran: window.__pwned = %v", rep.Pwned)
	}
	if rep.Primary != "#112233" {
		t.Errorf("--cohort-primary is %q", rep.Primary)
	}
	var types []string
	for _, b := range rep.Blocks {
		if !b.Visible {
			t.Errorf("block %s not visible (%.0fx%.0f)", b.Type, b.Width, b.Height)
		}
		types = append(types, b.Type)
	}
	for _, typ := range block.Types() {
		if !slices.Contains(types, typ) {
			t.Errorf("block type %s not on the page (%v)", typ, types)
		}
	}
	mu.Lock()
	got := slices.Clone(tracked)
	mu.Unlock()
	if !rep.Tracked || len(got) != 1 || got[0] != c.Tracking.PublicKey {
		t.Errorf("tracking: sent %v, keys received %q", rep.Tracked, got)
	}
	img, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) || len(img) < 10_000 {
		t.Fatalf("screenshot: %d bytes, PNG %v", len(img), bytes.HasPrefix(img, []byte("\x89PNG")))
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width != 1280 || cfg.Height < 900 {
		t.Errorf("screenshot %dx%d: %v", cfg.Width, cfg.Height, err)
	}
}
