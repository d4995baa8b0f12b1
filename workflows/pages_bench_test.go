package workflows

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/search"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// benchEnv reads a positive integer from the environment, else def.
func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var (
	benchAdjectives = []string{"classic", "slim", "relaxed", "cropped", "oversized", "lightweight", "warm", "soft", "vintage", "organic", "quilted", "ribbed"}
	benchMaterials  = []string{"linen", "cotton", "wool", "silk", "denim", "leather", "cashmere", "polyester", "merino", "corduroy"}
	benchColors     = []string{"white", "black", "navy", "sand", "olive", "red", "grey", "blue", "pink", "brown", "green", "cream"}
	benchKinds      = []string{"dress", "shirt", "coat", "jacket", "sweater", "trousers", "skirt", "scarf", "sneakers", "boots", "hat", "shorts", "blazer", "hoodie", "cardigan"}
	benchSeasons    = []string{"summer", "winter", "spring", "autumn", "all-season"}
)

// benchProduct is product i of the benchmark catalogue.
func benchProduct(i int) (sku, name string, data map[string]any) {
	adj := benchAdjectives[i%len(benchAdjectives)]
	mat := benchMaterials[(i/7)%len(benchMaterials)]
	col := benchColors[(i/3)%len(benchColors)]
	kind := benchKinds[(i/11)%len(benchKinds)]
	season := benchSeasons[(i/13)%len(benchSeasons)]
	sku = fmt.Sprintf("SKU-%06d", i)
	name = fmt.Sprintf("%s %s %s %s", strings.ToUpper(adj[:1])+adj[1:], col, mat, kind)
	data = map[string]any{
		"category":    kind,
		"material":    mat,
		"color":       col,
		"season":      season,
		"price":       float64(10+(i*37)%290) + 0.99,
		"description": fmt.Sprintf("A %s %s %s in %s for %s, model %d.", adj, mat, kind, col, season, i),
	}
	return sku, name, data
}

// seedBenchCatalog stores n products of the tenant with their local embeddings, written with
// COPY (the vectors computed here, not through the embedding queue and workflow).
func seedBenchCatalog(b *testing.B, s *pagesStack, tenantID int64, n int) {
	b.Helper()
	ctx := context.Background()
	sc, err := s.catalog.PutSchema(ctx, tenantID, catalog.Schema{Fields: []catalog.Field{
		{Name: "category", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "material", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "color", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "season", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "price", Type: catalog.TypePrice},
		{Name: "description", Type: catalog.TypeText, Searchable: true},
	}, DefaultCurrency: "EUR"})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, n)
	texts := make([]string, n)
	for i := range n {
		sku, name, data := benchProduct(i)
		raw, _ := json.Marshal(data)
		rows[i] = []any{tenantID, sku, name, strings.ToLower(sku), strings.ToLower(name), string(raw)}
		texts[i] = catalog.EmbeddingText(sc, name, data)
	}
	if _, err := s.db.Pool.CopyFrom(ctx, pgx.Identifier{"products"}, []string{"tenant_id", "sku", "name", "sku_key", "name_key", "data"},
		pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	idRows, err := s.db.Pool.Query(ctx, `SELECT id FROM products WHERE tenant_id = $1 ORDER BY sku`, tenantID)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(idRows, pgx.RowTo[int64])
	if err != nil || len(ids) != n {
		b.Fatalf("%d product ids, %v", len(ids), err)
	}
	vecs, err := s.ai.Embed(ctx, texts)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	model, dims := s.ai.EmbeddingModel(), s.ai.Dimensions()
	erows := make([][]any, n)
	for i := range n {
		h := sha256.Sum256([]byte(texts[i]))
		erows[i] = []any{ids[i], tenantID, model, dims, h[:], catalog.EncodeVector(vecs[i]), now}
	}
	if _, err := s.db.Pool.CopyFrom(ctx, pgx.Identifier{"product_embeddings"},
		[]string{"product_id", "tenant_id", "model", "dims", "text_hash", "vector", "updated_at"}, pgx.CopyFromRows(erows)); err != nil {
		b.Fatal(err)
	}
	testenv.Exec(b, s.db, `ANALYZE products`)
	testenv.Exec(b, s.db, `ANALYZE product_embeddings`)
}

// benchQueries stores q active AIQueries of the tenant, mixing the catalogue's words.
func benchQueries(b *testing.B, s *pagesStack, tenantID int64, q int) {
	b.Helper()
	texts := make([]string, q)
	for i := range q {
		texts[i] = fmt.Sprintf("%s %s %s for %s #%d", benchAdjectives[i%len(benchAdjectives)], benchMaterials[(i/2)%len(benchMaterials)],
			benchKinds[(i/3)%len(benchKinds)], benchSeasons[i%len(benchSeasons)], i+1)
	}
	testenv.Exec(b, s.db, `INSERT INTO ai_queries (tenant_id, text, active) SELECT $1, unnest($2::text[]), true`, tenantID, texts)
}

// BenchmarkBulkGenerate is issue 20's bulk generation figure: a bulk job over 200 active
// AIQueries (COHORT_BENCH_PAGE_QUERIES) of a tenant with 100k products
// (COHORT_BENCH_PAGE_PRODUCTS) whose embeddings are written directly, generated with the local
// provider by the real workflows and activities on a real worker against the embedded Temporal
// server and Postgres. Reported: seconds per job (s/job, from the API call to the job's end),
// pages per second, and the one-time cold load of the tenant's vectors into the worker's index
// (load_s, before the timer). The first job creates the pages; later ones regenerate them.
func BenchmarkBulkGenerate(b *testing.B) {
	nProducts := benchEnv("COHORT_BENCH_PAGE_PRODUCTS", 100_000)
	nQueries := benchEnv("COHORT_BENCH_PAGE_QUERIES", 200)
	ctx := context.Background()
	s := newPagesStack(b)
	tn := testenv.Tenant(b, s.db, "bench-pages")
	seedBenchCatalog(b, s, tn, nProducts)
	benchQueries(b, s, tn, nQueries)

	// The worker's index loads the tenant's vectors on its first search: timed apart.
	loadStart := time.Now()
	res, err := s.search.Search(ctx, tn, search.In{Query: "warm wool coat", Limit: 5})
	if err != nil {
		b.Fatal(err)
	}
	load := time.Since(loadStart)
	if len(res.Products) != 5 {
		b.Fatalf("warm-up search found %d products", len(res.Products))
	}

	b.ResetTimer()
	var total time.Duration
	for range b.N {
		start := time.Now()
		started, err := s.pages.BulkGenerate(ctx, tn)
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		var out PageBulkGenerateResult
		err = s.tc.GetWorkflow(wctx, PageBulkGenerateID(tn, started.JobID), "").Get(wctx, &out)
		cancel()
		if err != nil {
			b.Fatalf("bulk job: %v", err)
		}
		total += time.Since(start)
		if out.Status != page.JobComplete || out.Completed != nQueries {
			b.Fatalf("job %+v, want %d pages complete", out, nQueries)
		}
	}
	b.StopTimer()
	perJob := total.Seconds() / float64(b.N)
	b.ReportMetric(perJob, "s/job")
	b.ReportMetric(float64(nQueries)/perJob, "pages/s")
	b.ReportMetric(load.Seconds(), "load_s")
	b.ReportMetric(0, "ns/op")
}
