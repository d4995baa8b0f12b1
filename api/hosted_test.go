package api

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/pagehost"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// hostedServer is pagesServer with hosted pages (sitemap parts of sitemapURLs URLs) and the
// public base https://pages.example.
func hostedServer(t *testing.T, opts page.Options, sitemapURLs int) *pagesEnv {
	t.Helper()
	f := newFixture(t)
	gen := &fakePageGenerator{}
	svc := page.NewService(f.db.Pool, gen, time.Now, nil, opts)
	hosted := pagehost.New(pagehost.Deps{Pages: svc, Keys: pageexport.NewKeys(f.db.Pool, time.Now), SitemapURLs: sitemapURLs})
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: svc, Hosted: hosted, PublicURL: "https://pages.example"}
	}))
	return &pagesEnv{f: f, ts: ts, svc: svc, gen: gen}
}

const hostedTitle = `Linen </script><script>alert(1)</script> & "dresses"`

// hostedFixture: tenant A has a published page "linen" (title hostedTitle, two products with
// prices in EUR, one with an image and stock), a draft "draft"; tenant B a published "b-only".
func hostedFixture(t *testing.T, e *pagesEnv) page.Page {
	t.Helper()
	f := e.f
	testenv.Exec(t, f.db, `INSERT INTO product_schemas (tenant_id, default_currency) VALUES ($1, 'EUR')`, f.A.T.ID)
	testenv.Exec(t, f.db, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES
		($1, 'LIN-1', 'Linen <b>dress</b>', 'lin-1', 'linen dress', '{"price": 79, "image_url": "https://img.example/lin-1.jpg", "url": "https://shop.example/lin-1", "in_stock": true}'),
		($1, 'LIN-2', 'Linen shirt', 'lin-2', 'linen shirt', '{"price": "45.5"}')`, f.A.T.ID)
	q := e.query(t, f.A, `{"text":"linen dresses"}`)
	pub := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"slug":"linen","published":true}`, q.ID))
	e.generate(t, f.A.T.ID, pub.ID, "Linen", "LIN-1", "LIN-2")
	ok(t, jsonCall(t, e.ts, http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A),
		fmt.Sprintf(`{"title":%q}`, hostedTitle)), http.StatusOK, nil)
	e.page(t, f.A, fmt.Sprintf(`{"query":%d,"slug":"draft"}`, q.ID))
	qb := e.query(t, f.B, `{"text":"b"}`)
	e.page(t, f.B, fmt.Sprintf(`{"query":%d,"slug":"b-only","published":true}`, qb.ID))
	return pub
}

var ldRE = regexp.MustCompile(`(?s)<script type="application/ld\+json">(.*?)</script>`)

// checkSchemaOrg checks a JSON-LD document against schema.org's ItemList / ListItem / Product /
// Offer: the types, the properties each requires (Google's rich results name the same), integer
// positions from 1, price a decimal number as a string and priceCurrency an ISO 4217 code.
func checkSchemaOrg(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("JSON-LD does not parse: %v\n%s", err, raw)
	}
	if doc["@context"] != "https://schema.org" || doc["@type"] != "ItemList" {
		t.Fatalf("JSON-LD @context/@type %v/%v", doc["@context"], doc["@type"])
	}
	items, okList := doc["itemListElement"].([]any)
	if !okList {
		t.Fatalf("itemListElement %T", doc["itemListElement"])
	}
	if n, _ := doc["numberOfItems"].(float64); int(n) != len(items) {
		t.Errorf("numberOfItems %v, %d items", doc["numberOfItems"], len(items))
	}
	priceRE := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	for i, it := range items {
		li, _ := it.(map[string]any)
		if li["@type"] != "ListItem" {
			t.Errorf("item %d @type %v", i, li["@type"])
		}
		if pos, _ := li["position"].(float64); int(pos) != i+1 || pos != float64(int(pos)) {
			t.Errorf("item %d position %v", i, li["position"])
		}
		prod, _ := li["item"].(map[string]any)
		if prod["@type"] != "Product" {
			t.Errorf("item %d is a %v, want Product", i, prod["@type"])
		}
		if name, _ := prod["name"].(string); name == "" {
			t.Errorf("item %d Product without a name", i)
		}
		if sku, _ := prod["sku"].(string); sku == "" {
			t.Errorf("item %d Product without a sku", i)
		}
		for _, k := range []string{"image", "url"} {
			if v, has := prod[k]; has {
				if s, _ := v.(string); !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
					t.Errorf("item %d %s %v is not a URL", i, k, v)
				}
			}
		}
		offer, isOffer := prod["offers"].(map[string]any)
		if !isOffer {
			t.Errorf("item %d has no Offer", i)
			continue
		}
		if offer["@type"] != "Offer" {
			t.Errorf("item %d offers @type %v", i, offer["@type"])
		}
		if p, _ := offer["price"].(string); !priceRE.MatchString(p) {
			t.Errorf("item %d price %#v is not a number-string", i, offer["price"])
		}
		if c, _ := offer["priceCurrency"].(string); !regexp.MustCompile(`^[A-Z]{3}$`).MatchString(c) {
			t.Errorf("item %d priceCurrency %#v is not ISO 4217", i, offer["priceCurrency"])
		}
		if a, has := offer["availability"]; has && !strings.HasPrefix(fmt.Sprint(a), "https://schema.org/") {
			t.Errorf("item %d availability %v", i, a)
		}
	}
	return doc
}

func TestHostedPage(t *testing.T) {
	e := hostedServer(t, page.Options{FlushEvery: time.Hour}, 0)
	f, ts := e.f, e.ts
	pub := hostedFixture(t, e)
	target := "/p/" + f.A.T.Slug + "/linen"
	canonical := "https://pages.example" + target

	r := send(t, ts, http.MethodGet, target, hdr("User-Agent", "Mozilla/5.0"), nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, Content-Type %q: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	body := string(r.Body)
	for _, want := range []string{
		`<title>Linen &lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;dresses&#34;</title>`,
		`<meta name="description" content="About Linen">`,
		`<link rel="canonical" href="` + canonical + `">`,
		`<meta property="og:type" content="website">`,
		`<meta property="og:title" content="Linen &lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;dresses&#34;">`,
		`<meta property="og:description" content="About Linen">`,
		`<meta property="og:url" content="` + canonical + `">`,
		`<meta property="og:image" content="https://img.example/lin-1.jpg">`,
		`data-cohort-api="https://pages.example"`,
		`data-cohort-key="pk_`,
		`Linen &lt;b&gt;dress&lt;/b&gt;`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert(1)") || strings.Contains(body, "<b>dress") {
		t.Fatal("user-written text reached the HTML unescaped")
	}
	m := ldRE.FindAllStringSubmatch(body, -1)
	if len(m) != 1 {
		t.Fatalf("%d JSON-LD scripts", len(m))
	}
	doc := checkSchemaOrg(t, []byte(m[0][1]))
	if doc["name"] != hostedTitle || doc["url"] != canonical {
		t.Errorf("ItemList name %v url %v", doc["name"], doc["url"])
	}
	items := doc["itemListElement"].([]any)
	if len(items) != 2 {
		t.Fatalf("%d items", len(items))
	}
	first := items[0].(map[string]any)["item"].(map[string]any)
	offer := first["offers"].(map[string]any)
	if first["sku"] != "LIN-1" || first["name"] != "Linen <b>dress</b>" || first["image"] != "https://img.example/lin-1.jpg" ||
		first["url"] != "https://shop.example/lin-1" || offer["price"] != "79.00" || offer["priceCurrency"] != "EUR" ||
		offer["availability"] != "https://schema.org/InStock" {
		t.Errorf("first product %v", first)
	}
	second := items[1].(map[string]any)["item"].(map[string]any)
	if second["sku"] != "LIN-2" || second["offers"].(map[string]any)["price"] != "45.50" {
		t.Errorf("second product %v", second)
	}

	// Validators: a strong ETag of the bytes, a CDN may keep it as long as a server does.
	etag := r.Header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(etag) {
		t.Fatalf("ETag %q", etag)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=2" {
		t.Errorf("Cache-Control %q", cc)
	}
	for _, tc := range []struct {
		name, inm string
		status    int
	}{
		{"same tag", etag, http.StatusNotModified},
		{"tag in a list", `"other", ` + etag, http.StatusNotModified},
		{"star", "*", http.StatusNotModified},
		{"other tag", `"0000"`, http.StatusOK},
	} {
		t.Run("If-None-Match "+tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, target, hdr("If-None-Match", tc.inm), nil)
			if r.Status != tc.status || (tc.status == http.StatusNotModified && len(r.Body) != 0) {
				t.Fatalf("status %d, body %d bytes", r.Status, len(r.Body))
			}
			if r.Header.Get("ETag") != etag {
				t.Errorf("ETag %q", r.Header.Get("ETag"))
			}
		})
	}

	// The JSON endpoint answers the same document to a client that prefers HTML.
	jsonTarget := "/api/ai-pages/public/pages/" + f.A.T.Slug + "/linen/"
	for _, tc := range []struct {
		name, accept, wantType string
	}{
		{"browser", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"},
		{"html only", "text/html", "text/html"},
		{"json", "application/json", "application/json"},
		{"json preferred", "text/html;q=0.5, application/json", "application/json"},
		{"any", "*/*", "application/json"},
		{"none", "", "application/json"},
	} {
		t.Run("Accept "+tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.accept != "" {
				h.Set("Accept", tc.accept)
			}
			r := send(t, ts, http.MethodGet, jsonTarget, h, nil)
			if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), tc.wantType) {
				t.Fatalf("status %d Content-Type %q", r.Status, r.Header.Get("Content-Type"))
			}
			if !strings.Contains(r.Header.Get("Vary"), "Accept") {
				t.Errorf("Vary %q", r.Header.Get("Vary"))
			}
			if tc.wantType == "text/html" && string(r.Body) != body {
				t.Error("the JSON endpoint's HTML differs from /p/'s")
			}
		})
	}

	// Not found: unknown tenant, unknown page, a draft, another tenant's; HTML for a browser.
	for _, tgt := range []string{"/p/nobody/linen", "/p/" + f.A.T.Slug + "/missing", "/p/" + f.A.T.Slug + "/draft",
		"/p/" + f.B.T.Slug + "/linen", "/p/" + f.A.T.Slug + "/b-only"} {
		t.Run("404 "+tgt, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, tgt, hdr("Accept", "text/html"), nil)
			if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.Body), "Page not found") {
				t.Fatalf("status %d %q: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			wantError(t, send(t, ts, http.MethodGet, tgt, hdr("Accept", "application/json"), nil), http.StatusNotFound, "not_found")
		})
	}
	r = send(t, ts, http.MethodGet, "/api/ai-pages/public/pages/"+f.A.T.Slug+"/draft/", hdr("Accept", "text/html"), nil)
	if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("JSON route 404 for a browser: %d %q", r.Status, r.Header.Get("Content-Type"))
	}

	// Counting: HEAD counts nothing; crawler reads count under their names.
	if err := e.svc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := testenv.Count(t, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, pub.ID)
	if r := send(t, ts, http.MethodHead, target, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("HEAD %d", r.Status)
	}
	for _, ua := range []string{
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
	} {
		if r := send(t, ts, http.MethodGet, target, hdr("User-Agent", ua), nil); r.Status != http.StatusOK {
			t.Fatalf("crawler read %d", r.Status)
		}
	}
	if err := e.svc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, pub.ID); n != before+3 {
		t.Errorf("view_count %d after HEAD and 3 crawler reads, want %d", n, before+3)
	}
	var pg page.Page
	ok(t, send(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A), nil), http.StatusOK, &pg)
	if pg.AICrawls["GPTBot"] != 1 || pg.AICrawls["ClaudeBot"] != 2 || pg.LastAICrawlAt == nil {
		t.Fatalf("ai_crawls %v, last_ai_crawl_at %v", pg.AICrawls, pg.LastAICrawlAt)
	}

	// A change of the page shows at once and changes the tag.
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A), `{"title":"Linen, new"}`), http.StatusOK, nil)
	r = send(t, ts, http.MethodGet, target, hdr("If-None-Match", etag), nil)
	if r.Status != http.StatusOK || r.Header.Get("ETag") == etag || !strings.Contains(string(r.Body), "<title>Linen, new</title>") {
		t.Fatalf("after a change: %d, ETag %q", r.Status, r.Header.Get("ETag"))
	}
}

// TestPublicPageETagAndCORS: the public JSON read carries a weak ETag (view_count aside) and
// Cache-Control, answers 304 to it, and any origin may read it without credentials.
func TestPublicPageETagAndCORS(t *testing.T) {
	e := hostedServer(t, page.Options{}, 0)
	f, ts := e.f, e.ts
	hostedFixture(t, e)
	target := "/api/ai-pages/public/pages/" + f.A.T.Slug + "/linen/"

	r1 := send(t, ts, http.MethodGet, target, hdr("Origin", "https://shop.example"), nil)
	r2 := send(t, ts, http.MethodGet, target, hdr("Origin", "https://other.example"), nil)
	if r1.Status != http.StatusOK || r2.Status != http.StatusOK {
		t.Fatalf("status %d %d", r1.Status, r2.Status)
	}
	etag := r1.Header.Get("ETag")
	if !strings.HasPrefix(etag, `W/"`) || r2.Header.Get("ETag") != etag {
		t.Fatalf("ETags %q %q: want one weak tag across view counts", etag, r2.Header.Get("ETag"))
	}
	if cc := r1.Header.Get("Cache-Control"); cc != "public, max-age=2" {
		t.Errorf("Cache-Control %q", cc)
	}
	for _, r := range []result{r1, r2} {
		if r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Access-Control-Allow-Credentials") != "" ||
			!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "ETag") {
			t.Errorf("CORS headers %v", r.Header)
		}
	}
	r := send(t, ts, http.MethodGet, target, hdr("If-None-Match", etag), nil)
	if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != etag {
		t.Fatalf("If-None-Match: %d %q", r.Status, r.Body)
	}
	if r := send(t, ts, http.MethodGet, target, hdr("If-None-Match", `W/"other"`), nil); r.Status != http.StatusOK {
		t.Fatalf("other tag: %d", r.Status)
	}
	// A 404 is readable too (a storefront sees why).
	r = send(t, ts, http.MethodGet, "/api/ai-pages/public/pages/"+f.A.T.Slug+"/draft/", hdr("Origin", "https://shop.example"), nil)
	if r.Status != http.StatusNotFound || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("404: %d %v", r.Status, r.Header)
	}

	for _, tc := range []struct{ name, path string }{
		{"public JSON", target},
		{"hosted page", "/p/" + f.A.T.Slug + "/linen"},
	} {
		t.Run("preflight "+tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodOptions, tc.path, hdr("Origin", "https://anywhere.example", "Access-Control-Request-Method", "GET",
				"Access-Control-Request-Headers", "if-none-match"), nil)
			if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "*" ||
				!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "GET") ||
				!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "If-None-Match") ||
				r.Header.Get("Access-Control-Allow-Credentials") != "" {
				t.Fatalf("preflight %d %v", r.Status, r.Header)
			}
		})
	}
	// The per-tenant rules of the browser-callable endpoints are untouched: their preflight
	// echoes the origin.
	r = send(t, ts, http.MethodOptions, "/api/ingestion/track/", hdr("Origin", "https://shop.example", "Access-Control-Request-Method", "POST"), nil)
	if r.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Fatalf("ingestion preflight ACAO %q", r.Header.Get("Access-Control-Allow-Origin"))
	}
}

type sitemapURLSet struct {
	URLs []struct {
		Loc     string `xml:"loc"`
		LastMod string `xml:"lastmod"`
	} `xml:"url"`
}

type sitemapIndex struct {
	Sitemaps []struct {
		Loc     string `xml:"loc"`
		LastMod string `xml:"lastmod"`
	} `xml:"sitemap"`
}

func publishPages(t *testing.T, e *pagesEnv, c tenantCreds, slugs ...string) {
	t.Helper()
	q := e.query(t, c, `{"text":"more pages"}`)
	for _, s := range slugs {
		e.page(t, c, fmt.Sprintf(`{"query":%d,"slug":%q,"title":"Title of %s","published":true}`, q.ID, s, s))
	}
}

func TestHostedSitemapRobotsLLMs(t *testing.T) {
	e := hostedServer(t, page.Options{}, 2)
	f, ts := e.f, e.ts
	hostedFixture(t, e)
	publishPages(t, e, f.A, "alpha", "beta")
	base := "https://pages.example/p/" + f.A.T.Slug + "/"
	wantA := []string{base + "alpha", base + "beta", base + "linen"}

	// Three published pages of A, two per file: sitemap.xml is an index of two parts.
	r := send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/sitemap.xml", nil, nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/xml") || r.Header.Get("ETag") == "" {
		t.Fatalf("sitemap: %d %v", r.Status, r.Header)
	}
	var idx sitemapIndex
	if err := xml.Unmarshal(r.Body, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Sitemaps) != 2 || idx.Sitemaps[0].Loc != base+"sitemap-1.xml" || idx.Sitemaps[1].Loc != base+"sitemap-2.xml" {
		t.Fatalf("index %s", r.Body)
	}
	var got []string
	for i := range idx.Sitemaps {
		r := send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/sitemap-"+strconv.Itoa(i+1)+".xml", nil, nil)
		var set sitemapURLSet
		if r.Status != http.StatusOK {
			t.Fatalf("part %d: %d", i+1, r.Status)
		}
		if err := xml.Unmarshal(r.Body, &set); err != nil {
			t.Fatal(err)
		}
		for _, u := range set.URLs {
			if _, err := time.Parse(time.RFC3339, u.LastMod); err != nil {
				t.Errorf("lastmod %q: %v", u.LastMod, err)
			}
			got = append(got, u.Loc)
		}
	}
	if !slices.Equal(got, wantA) {
		t.Fatalf("sitemap parts list %v, want %v", got, wantA)
	}
	wantError(t, send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/sitemap-3.xml", nil, nil), http.StatusNotFound, "not_found")
	wantError(t, send(t, ts, http.MethodGet, "/p/nobody/sitemap.xml", nil, nil), http.StatusNotFound, "not_found")
	if r := send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/sitemap.xml", hdr("If-None-Match", r.Header.Get("ETag")), nil); r.Status != http.StatusNotModified {
		t.Fatalf("sitemap If-None-Match: %d", r.Status)
	}

	// B has one page: one urlset, and nothing of A's.
	r = send(t, ts, http.MethodGet, "/p/"+f.B.T.Slug+"/sitemap.xml", nil, nil)
	var setB sitemapURLSet
	if err := xml.Unmarshal(r.Body, &setB); err != nil || len(setB.URLs) != 1 || setB.URLs[0].Loc != "https://pages.example/p/"+f.B.T.Slug+"/b-only" {
		t.Fatalf("B's sitemap %s (%v)", r.Body, err)
	}
	wantError(t, send(t, ts, http.MethodGet, "/p/"+f.B.T.Slug+"/sitemap-1.xml", nil, nil), http.StatusNotFound, "not_found")

	// llms.txt: the tenant's name, a summary, and exactly its published pages.
	r = send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/llms.txt", nil, nil)
	if r.Status != http.StatusOK || r.Header.Get("ETag") == "" {
		t.Fatalf("llms.txt %d", r.Status)
	}
	lines := strings.Split(string(r.Body), "\n")
	if lines[0] != "# "+f.A.T.Name || !strings.HasPrefix(lines[2], "> ") || !slices.Contains(lines, "## Pages") {
		t.Fatalf("llms.txt:\n%s", r.Body)
	}
	linkRE := regexp.MustCompile(`^- \[(.*)\]\((\S+)\)(: .*)?$`)
	got = nil
	for _, l := range lines {
		if m := linkRE.FindStringSubmatch(l); m != nil {
			got = append(got, m[2])
			if m[2] == base+"linen" && (m[1] != `Linen </script><script>alert(1)</script> & "dresses"` || m[3] != ": About Linen") {
				t.Errorf("linen entry %q", l)
			}
		}
	}
	if !slices.Equal(got, wantA) {
		t.Fatalf("llms.txt lists %v, want %v", got, wantA)
	}
	r = send(t, ts, http.MethodGet, "/p/"+f.B.T.Slug+"/llms.txt", nil, nil)
	if strings.Contains(string(r.Body), f.A.T.Slug) || !strings.Contains(string(r.Body), "/p/"+f.B.T.Slug+"/b-only") {
		t.Fatalf("B's llms.txt:\n%s", r.Body)
	}
	wantError(t, send(t, ts, http.MethodGet, "/p/nobody/llms.txt", nil, nil), http.StatusNotFound, "not_found")

	// The crawler setting: all allowed by default; blocked ones are disallowed in robots.txt.
	var set page.CrawlerSettings
	ok(t, send(t, ts, http.MethodGet, "/api/ai-pages/settings/", bearer(f.A), nil), http.StatusOK, &set)
	if len(set.BlockedAICrawlers) != 0 || !slices.Equal(set.KnownAICrawlers, page.Crawlers) {
		t.Fatalf("default settings %+v", set)
	}
	robots := string(send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/robots.txt", nil, nil).Body)
	if strings.Contains(robots, "Disallow") || !strings.Contains(robots, "User-agent: GPTBot\nAllow: /\n") ||
		!strings.Contains(robots, "Sitemap: "+base+"sitemap.xml\n") {
		t.Fatalf("default robots.txt:\n%s", robots)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		want       []string
	}{
		{"block two, any case", `{"blocked_ai_crawlers":["gptbot","CCBot","GPTBot"]}`, http.StatusOK, []string{"GPTBot", "CCBot"}},
		{"unknown crawler", `{"blocked_ai_crawlers":["GPTBot","NoSuchBot"]}`, http.StatusBadRequest, nil},
		{"missing field", `{}`, http.StatusBadRequest, nil},
		{"unknown field", `{"allowed":[]}`, http.StatusBadRequest, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonCall(t, ts, http.MethodPut, "/api/ai-pages/settings/", bearer(f.A), tc.body)
			if tc.status != http.StatusOK {
				if r.Status != tc.status || errorBody(t, r).Code == "" {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				return
			}
			ok(t, r, http.StatusOK, &set)
			if !slices.Equal(set.BlockedAICrawlers, tc.want) {
				t.Fatalf("blocked %v", set.BlockedAICrawlers)
			}
		})
	}
	robots = string(send(t, ts, http.MethodGet, "/p/"+f.A.T.Slug+"/robots.txt", nil, nil).Body)
	for _, want := range []string{"User-agent: GPTBot\nDisallow: /\n", "User-agent: CCBot\nDisallow: /\n", "User-agent: ClaudeBot\nAllow: /\n", "User-agent: *\nAllow: /\n"} {
		if !strings.Contains(robots, want) {
			t.Errorf("robots.txt lacks %q:\n%s", want, robots)
		}
	}
	if strings.Count(robots, "Disallow") != 2 {
		t.Errorf("robots.txt:\n%s", robots)
	}
	// B's setting is its own.
	if robotsB := string(send(t, ts, http.MethodGet, "/p/"+f.B.T.Slug+"/robots.txt", nil, nil).Body); strings.Contains(robotsB, "Disallow") {
		t.Errorf("B's robots.txt:\n%s", robotsB)
	}
	wantError(t, send(t, ts, http.MethodGet, "/p/nobody/robots.txt", nil, nil), http.StatusNotFound, "not_found")
	if r := send(t, ts, http.MethodGet, "/api/ai-pages/settings/", nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("settings without credentials: %d", r.Status)
	}
}
