package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/pagehost"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// benchPublishedPage publishes tenant A's page of twelve products priced in EUR (three blocks),
// the page BenchmarkPublicPage and BenchmarkHostedPage read, and returns its slug.
func benchPublishedPage(b *testing.B, f *fixture) string {
	b.Helper()
	ctx := context.Background()
	var values []string
	skus := make([]string, 12)
	for i := range skus {
		skus[i] = fmt.Sprintf("LIN-%02d", i+1)
		values = append(values, fmt.Sprintf(`(%d, '%s', 'Linen dress %d', '%s', 'linen dress %d', '{"price": %d, "image_url": "https://img.example/%s.jpg", "color": "white", "material": "linen"}')`,
			f.A.T.ID, skus[i], i+1, strings.ToLower(skus[i]), i+1, 40+i, skus[i]))
	}
	testenv.Exec(b, f.db, `INSERT INTO product_schemas (tenant_id, default_currency) VALUES ($1, 'EUR')`, f.A.T.ID)
	testenv.Exec(b, f.db, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES `+strings.Join(values, ","))
	setup := page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{})
	q, err := setup.CreateQuery(ctx, f.A.T.ID, page.QueryInput{Text: "linen summer dresses under 80 euros"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := setup.CreatePage(ctx, f.A.T.ID, page.CreateInput{Query: &q.ID, Published: new(true)})
	if err != nil {
		b.Fatal(err)
	}
	items := make([]any, len(skus))
	for i, s := range skus {
		items[i] = s
	}
	blocks := []block.Block{
		{Type: block.Hero, Props: map[string]any{"headline": "Linen summer dresses", "subheadline": "Light, breathable and under 80 euros", "cta_label": "Shop now", "cta_url": "/collections/linen"}},
		{Type: block.ProductGrid, Props: map[string]any{"product_skus": items, "columns": 3}},
		{Type: block.TextSection, Props: map[string]any{"heading": "Why linen", "body": strings.Repeat("Linen keeps you cool on hot days. ", 10)}},
	}
	if err := setup.SaveGenerated(ctx, f.A.T.ID, p.ID, page.GeneratedContent{IntroCopy: strings.Repeat("Our lightest dresses for summer. ", 8), ProductSKUs: skus, Blocks: blocks}); err != nil {
		b.Fatal(err)
	}
	return p.Slug
}

// hostedBenchServer serves the real router with hosted pages (counting on) on a loopback
// listener until the benchmark ends.
func hostedBenchServer(b *testing.B, f *fixture, sitemapURLs int) (svc *page.Service, base string) {
	b.Helper()
	svc = page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{})
	ctx, stop := context.WithCancel(context.Background())
	counterDone := make(chan error, 1)
	go func() { counterDone <- svc.Run(ctx) }()
	hosted := pagehost.New(pagehost.Deps{Pages: svc, Keys: pageexport.NewKeys(f.db.Pool, time.Now), SitemapURLs: sitemapURLs})
	srv := &http.Server{Handler: New(Deps{Auth: f.authenticator(nil, 0), Pages: &PagesDeps{Service: svc, Hosted: hosted, PublicURL: "https://pages.example"}}).Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		stop()
		if err := <-counterDone; err != nil {
			b.Error(err)
		}
	})
	return svc, "http://" + ln.Addr().String()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkHostedPage: hosted HTML reads (GET /p/{tenant}/{page}) against public JSON reads of
// the same page, both with view counting on, through the real router on a loopback listener,
// the load from a second process (TestPagesLoadGenerator, as BenchmarkPublicPage runs it). Each
// iteration runs JSON then HTML; it reports the median req/s of each over the iterations and
// html_x_json, the ratio of the medians, and checks view_count grew by exactly the reads served.
// Run with -benchtime=Nx for N alternating rounds.
func BenchmarkHostedPage(b *testing.B) {
	f := newFixture(b)
	slug := benchPublishedPage(b, f)
	svc, base := hostedBenchServer(b, f, 0)
	pageID := int64(testenv.Count(b, f.db, `SELECT id FROM generated_pages WHERE tenant_id = $1 AND slug = $2`, f.A.T.ID, slug))
	targets := map[string]string{
		"json": base + "/api/ai-pages/public/pages/" + f.A.T.Slug + "/" + slug + "/",
		"html": base + "/p/" + f.A.T.Slug + "/" + slug,
	}
	viewsBefore := testenv.Count(b, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, pageID)
	rates := map[string][]float64{}
	var served int64
	b.ResetTimer()
	for range b.N {
		for _, kind := range []string{"json", "html"} {
			r := runPagesLoad(b, targets[kind])
			if r.Errors > 0 {
				b.Errorf("%s: %d reads failed", kind, r.Errors)
			}
			served += r.Requests
			rates[kind] = append(rates[kind], float64(r.Requests)/r.Seconds)
		}
	}
	b.StopTimer()
	if err := svc.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if views := testenv.Count(b, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, pageID); views-viewsBefore != served {
		b.Errorf("view_count grew by %d for %d reads", views-viewsBefore, served)
	}
	j, h := median(rates["json"]), median(rates["html"])
	b.ReportMetric(j, "json_req/s")
	b.ReportMetric(h, "html_req/s")
	b.ReportMetric(h/j, "html_x_json")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkHostedSitemap: GET /p/{tenant}/sitemap.xml of a tenant with 10,000 published pages
// (another tenant has 2,000 more) over loopback; reports the p50 and p95 latency of the reads.
func BenchmarkHostedSitemap(b *testing.B) {
	f := newFixture(b)
	for _, t := range []struct {
		id int64
		n  int
	}{{f.A.T.ID, 10000}, {f.B.T.ID, 2000}} {
		testenv.Exec(b, f.db, `INSERT INTO generated_pages (tenant_id, slug, title, published, intro_copy, status, updated_at)
			SELECT $1, 'linen-page-' || i, 'Linen page ' || i, true, 'Light linen for summer, selection ' || i, 'ready', now() - i * interval '1 minute'
			FROM generate_series(1, $2::int) i`, t.id, t.n)
	}
	_, base := hostedBenchServer(b, f, 0)
	target := base + "/p/" + f.A.T.Slug + "/sitemap.xml"
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() time.Duration {
		start := time.Now()
		resp, err := client.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("sitemap: %d %v", resp.StatusCode, err)
		}
		if n := strings.Count(string(body), "<loc>"); n != 10000 {
			b.Fatalf("sitemap lists %d URLs", n)
		}
		return time.Since(start)
	}
	get() // warm the connection and the database's caches
	var lat []float64
	b.ResetTimer()
	for range b.N {
		lat = append(lat, float64(get().Microseconds())/1000)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "p50_ms")
	b.ReportMetric(lat[min(len(lat)-1, len(lat)*95/100)], "p95_ms")
	b.ReportMetric(0, "ns/op")
}
