package workflows

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/testenv"
)

type nopPageGenerator struct{}

func (nopPageGenerator) StartGeneration(context.Context, int64, int64) error { return nil }
func (nopPageGenerator) StartBulk(context.Context, int64, int64) error       { return nil }

// exportBenchBlocks are 30 blocks, five of each registry type, the grids over the seeded products.
func exportBenchBlocks(skus []any) []block.Block {
	var out []block.Block
	for i := range 5 {
		s := fmt.Sprintf(" %d", i)
		out = append(out,
			block.Block{Type: block.Hero, Props: map[string]any{"headline": "Summer linen" + s, "subheadline": "Light & breezy <pieces>" + s,
				"cta_label": "Shop now", "cta_url": "/shop", "image_url": "https://img.example/hero.png"}},
			block.Block{Type: block.ProductGrid, Props: map[string]any{"product_skus": skus, "columns": float64(4)}},
			block.Block{Type: block.TextSection, Props: map[string]any{"heading": "Why linen" + s, "body": "Linen breathes.\nIt lasts for years." + s}},
			block.Block{Type: block.CTABanner, Props: map[string]any{"headline": "Free returns" + s, "cta_label": "Learn more", "cta_url": "https://shop.example/returns"}},
			block.Block{Type: block.FeatureList, Props: map[string]any{"heading": "Features" + s, "items": []any{
				map[string]any{"title": "Breathable", "description": "Cool in the heat."}, map[string]any{"title": "Durable"}}}},
			block.Block{Type: block.Testimonial, Props: map[string]any{"quote": "Best dress I own." + s, "author": "Ann", "role": "Verified buyer"}},
		)
	}
	return out
}

// BenchmarkPageExport30Blocks measures an export of a 30-block page (zip: all three renderings
// and the README) through the workflow on the embedded Temporal server, from the request (record
// and start) to the file stored and the export ready; it reports the p95 in milliseconds.
func BenchmarkPageExport30Blocks(b *testing.B) {
	db := testenv.OpenDB(b)
	tc := testenv.Temporal(b)
	queue := testenv.TaskQueue(b)
	ctx := context.Background()
	tenantID := testenv.Tenant(b, db, "bench-export")
	pages := page.NewService(db.Pool, nopPageGenerator{}, time.Now, nil, page.Options{})
	var skus []any
	var skuList []string
	for i := range 12 {
		sku, name, _ := benchProduct(i)
		testenv.Exec(b, db, `INSERT INTO products (tenant_id, sku, sku_key, name, name_key, data) VALUES ($1, $2, lower($2), $3, lower($3), '{"price": 19.99}')`, tenantID, sku, name)
		skus = append(skus, sku)
		skuList = append(skuList, sku)
	}
	q, err := pages.CreateQuery(ctx, tenantID, page.QueryInput{Text: "linen"})
	if err != nil {
		b.Fatal(err)
	}
	slug := "linen"
	p, err := pages.CreatePage(ctx, tenantID, page.CreateInput{Query: &q.ID, Slug: &slug})
	if err != nil {
		b.Fatal(err)
	}
	if err := pages.SaveGenerated(ctx, tenantID, p.ID, page.GeneratedContent{IntroCopy: "Linen for summer.", ProductSKUs: skuList, Blocks: exportBenchBlocks(skus)}); err != nil {
		b.Fatal(err)
	}
	store, err := blob.NewLocal(blob.LocalConfig{Dir: filepath.Join(b.TempDir(), "blobs"), BaseURL: "http://cohort.test", SigningKey: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		b.Fatal(err)
	}
	jobs := &Starter{Client: tc, TaskQueue: queue}
	svc := pageexport.NewService(pageexport.Deps{Pool: db.Pool, Pages: pages, Keys: pageexport.NewKeys(db.Pool, nil), Blob: store, Starter: jobs})
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflow(PageExport)
	w.RegisterActivity(&activities.Exports{Svc: svc})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		st, err := svc.Start(ctx, tenantID, p.ID, "zip", "https://api.cohort.test")
		if err != nil {
			b.Fatal(err)
		}
		if err := tc.GetWorkflow(ctx, PageExportID(tenantID, st.ExportID), "").Get(ctx, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	e, err := svc.Get(ctx, tenantID, p.ID, 0)
	if err != nil || e.Status != pageexport.StatusReady {
		b.Fatalf("last export %+v, %v", e, err)
	}
	slices.Sort(lat)
	p95 := lat[min(len(lat)-1, len(lat)*95/100)]
	b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(*e.SizeBytes), "zip-bytes")
}
