package catalogbench

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// shopifyHeader is the column layout of a Shopify product export.
var shopifyHeader = []string{"Handle", "Title", "Body (HTML)", "Vendor", "Product Category", "Type", "Tags", "Published",
	"Option1 Name", "Option1 Value", "Option2 Name", "Option2 Value", "Variant SKU", "Variant Grams",
	"Variant Inventory Tracker", "Variant Inventory Qty", "Variant Inventory Policy", "Variant Fulfillment Service",
	"Variant Price", "Variant Compare At Price", "Variant Requires Shipping", "Variant Taxable", "Variant Barcode",
	"Image Src", "Image Position", "Image Alt Text", "Gift Card", "SEO Title", "SEO Description", "Variant Image",
	"Variant Weight Unit", "Cost per item", "Status"}

var sizes = []string{"S", "M", "L", "XL"}

// writeShopifyCSV writes rows variant rows in the Shopify layout: four sizes per product, the
// product's columns on its first row only, as Shopify exports them.
func writeShopifyCSV(w io.Writer, rows int) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(shopifyHeader); err != nil {
		return err
	}
	rec := make([]string, len(shopifyHeader))
	for i := range rows {
		p, v := i/len(sizes), i%len(sizes)
		handle := fmt.Sprintf("%s-%s-%d", words[p%10], words[(p/10)%10], p)
		clear(rec)
		rec[0] = handle
		if v == 0 {
			rec[1] = fmt.Sprintf("%s %s %s %d", words[p%10], words[(p/10)%10], words[(p/100)%10], p)
			rec[2] = "<p>A " + words[p%10] + " piece from the " + brands[p%len(brands)] + " collection.</p>\n<ul><li>Machine wash</li></ul>"
			rec[3] = brands[p%len(brands)]
			rec[4] = "Apparel & Accessories > Clothing"
			rec[5] = words[(p/3)%10]
			rec[6] = words[p%7] + ", " + words[(p+3)%10]
			rec[7] = "true"
			rec[8], rec[10] = "Size", "Color"
			rec[26], rec[27], rec[28] = "false", rec[1]+" | Shop", "Buy the "+rec[1]
			rec[32] = "active"
			rec[23] = fmt.Sprintf("https://cdn.shopify.com/s/files/1/0612/products/%s.jpg?v=17", handle)
			rec[24] = "1"
		}
		rec[9], rec[11] = sizes[v], colors[p%len(colors)]
		rec[12] = fmt.Sprintf("SKU-%07d-%s", p, sizes[v])
		rec[13] = strconv.Itoa(150 + v*10)
		rec[14], rec[15], rec[16], rec[17] = "shopify", strconv.Itoa(i%50), "deny", "manual"
		rec[18] = fmt.Sprintf("%d.90", 10+p%90)
		rec[19] = fmt.Sprintf("%d.90", 20+p%90)
		rec[20], rec[21] = "true", "true"
		rec[22] = fmt.Sprintf("40063%08d", i)
		rec[30], rec[31] = "kg", fmt.Sprintf("%d.50", 4+p%20)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func importFixture(b *testing.B) (*imports.Service, *catalog.Service, int64) {
	b.Helper()
	db := testenv.OpenDB(b)
	tenant := testenv.Tenant(b, db, "import-bench")
	store, err := blob.NewLocal(blob.LocalConfig{Dir: b.TempDir(), BaseURL: "http://127.0.0.1", SigningKey: bytes.Repeat([]byte{9}, 32), Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	cat := catalog.NewService(db.Pool, time.Now)
	svc := imports.NewService(db.Pool, cat, store, noStart{}, time.Now)
	return svc, cat, tenant
}

// noStart lets Confirm succeed without starting anything: the benchmark runs the import itself.
type noStart struct{}

func (noStart) StartImport(context.Context, int64, int64) (string, error) { return "bench", nil }

// BenchmarkCatalogImport: a 100k-row Shopify export (COHORT_BENCH_IMPORT_ROWS resizes) uploaded,
// analysed, confirmed with the suggested mapping and imported while the embeddings are drained
// beside it with the local provider: rows/s of the import alone (rows/s) and until every product
// is embedded (rows/s-embedded), and the upload+analysis time.
func BenchmarkCatalogImport(b *testing.B) {
	rows := 100_000
	if v, err := strconv.Atoi(os.Getenv("COHORT_BENCH_IMPORT_ROWS")); err == nil && v > 0 {
		rows = v
	}
	var file bytes.Buffer
	if err := writeShopifyCSV(&file, rows); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		svc, cat, tenant := importFixture(b)
		t0 := time.Now()
		job, err := svc.Upload(ctx, tenant, "products_export.csv", bytes.NewReader(file.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		upload := time.Since(t0)
		schema := job.SuggestedSchema
		if _, err := svc.Confirm(ctx, tenant, job.JobID, imports.ConfirmInput{Mapping: job.SuggestedMapping, Schema: &schema}); err != nil {
			b.Fatal(err)
		}
		// The embedding workflow's drain runs beside the import, as in the worker: batches of 512
		// through the local provider until the import is done and the queue is empty.
		provider, err := ai.NewLocal(ai.Config{})
		if err != nil {
			b.Fatal(err)
		}
		importing := make(chan struct{})
		drained := make(chan error, 1)
		var embedded atomic.Int64
		go func() {
			for {
				r, err := cat.DrainEmbeddings(ctx, tenant, provider, 512)
				if err != nil {
					drained <- err
					return
				}
				embedded.Add(int64(r.Embedded))
				if r.Read == 0 {
					select {
					case <-importing:
						r, err := cat.DrainEmbeddings(ctx, tenant, provider, 512)
						if err != nil || r.Read == 0 {
							drained <- err
							return
						}
						embedded.Add(int64(r.Embedded))
						continue
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		}()
		t1 := time.Now()
		if err := svc.Run(ctx, tenant, job.JobID, nil); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t1)
		close(importing)
		if err := <-drained; err != nil {
			b.Fatal(err)
		}
		withEmbeddings := time.Since(t1)
		if embedded.Load() != int64(rows) {
			b.Fatalf("%d embeddings for %d products", embedded.Load(), rows)
		}
		done, err := svc.Get(ctx, tenant, job.JobID)
		if err != nil {
			b.Fatal(err)
		}
		if done.Status != imports.StatusDone || done.Created != int64(rows) || done.FailedRows != 0 {
			b.Fatalf("import: %s created %d failed %d %v", done.Status, done.Created, done.FailedRows, done.Errors)
		}
		b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
		b.ReportMetric(float64(rows)/withEmbeddings.Seconds(), "rows/s-embedded")
		b.ReportMetric(float64(upload.Milliseconds()), "upload+analysis-ms")
		b.ReportMetric(float64(file.Len())/(1<<20), "file-MB")
	}
}

// BenchmarkCatalogAnalyze200MB uploads a 200 MB Shopify export from disk: the time until the
// suggested mapping is answered (stored in the blob store, then a sample analysed).
func BenchmarkCatalogAnalyze200MB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.csv")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	// More rows than fit: capWriter stops on the last whole line under the upload limit.
	if err := writeShopifyCSV(&capWriter{w: f, limit: imports.MaxFileBytes}, 2_000_000); err != nil && err != errFull {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	svc, _, tenant := importFixture(b)
	for b.Loop() {
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		job, err := svc.Upload(ctx, tenant, "big.csv", in)
		took := time.Since(t0)
		_ = in.Close()
		if err != nil {
			b.Fatal(err)
		}
		if job.RowsEstimated < 100_000 {
			b.Fatalf("rows estimated %d", job.RowsEstimated)
		}
		b.ReportMetric(float64(took.Milliseconds()), "ms")
		b.ReportMetric(float64(job.SizeBytes)/(1<<20), "MB")
		b.ReportMetric(float64(job.RowsEstimated), "rows-estimated")
	}
}

var errFull = fmt.Errorf("full")

// capWriter stops at limit bytes, on a line boundary.
type capWriter struct {
	w     io.Writer
	n     int
	limit int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.n+len(p) > c.limit {
		if i := bytes.LastIndexByte(p[:c.limit-c.n], '\n'); i >= 0 {
			k, _ := c.w.Write(p[:i+1])
			c.n += k
		}
		return 0, errFull
	}
	k, err := c.w.Write(p)
	c.n += k
	return k, err
}
