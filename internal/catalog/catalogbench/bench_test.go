// Package catalogbench measures the catalogue at 100k products (COHORT_BENCH_PRODUCTS resizes):
// bulk upsert throughput (created, then updated), list with a field filter and q (page_size 50)
// and facets, as p50/p95 over repeated calls of the service.
//
//	task bench:catalog
package catalogbench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func products() int {
	if v, err := strconv.Atoi(os.Getenv("COHORT_BENCH_PRODUCTS")); err == nil && v > 0 {
		return v
	}
	return 100_000
}

var (
	colors = []string{"red", "blue", "green", "black", "white", "navy", "beige", "olive", "grey", "pink"}
	brands = []string{"Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne"}
	words  = []string{"linen", "cotton", "wool", "shirt", "dress", "jacket", "summer", "classic", "slim", "relaxed"}
)

func product(i int, rev int) map[string]any {
	return map[string]any{
		"sku":         fmt.Sprintf("SKU-%07d", i),
		"name":        fmt.Sprintf("%s %s %s %d", words[i%10], words[(i/10)%10], words[(i/100)%10], i),
		"color":       colors[i%len(colors)],
		"brand":       brands[(i/3)%len(brands)],
		"tags":        []any{words[i%7], words[(i+3)%10]},
		"price":       float64(10 + (i+rev)%90),
		"stock":       float64(i % 500),
		"active":      i%4 != 0,
		"description": "A " + words[i%10] + " piece from the " + brands[i%len(brands)] + " collection.",
	}
}

func setup(b *testing.B) (*catalog.Service, int64, *store.DB) {
	db := testenv.OpenDB(b)
	svc := catalog.NewService(db.Pool, time.Now)
	return svc, newTenant(b, db, svc), db
}

// benchTenants makes the slugs of newTenant unique.
var benchTenants atomic.Int64

// newTenant creates a tenant with the benchmark's schema.
func newTenant(b *testing.B, db *store.DB, svc *catalog.Service) int64 {
	tenant := testenv.Tenant(b, db, fmt.Sprintf("bench-%d", benchTenants.Add(1)))
	_, err := svc.PutSchema(context.Background(), tenant, catalog.Schema{Fields: []catalog.Field{
		{Name: "color", Type: catalog.TypeString, Facet: true},
		{Name: "brand", Type: catalog.TypeString, Facet: true},
		{Name: "tags", Type: catalog.TypeArray, Facet: true},
		{Name: "price", Type: catalog.TypePrice, Required: true},
		{Name: "stock", Type: catalog.TypeInteger},
		{Name: "active", Type: catalog.TypeBoolean},
		{Name: "description", Type: catalog.TypeText, Searchable: true},
	}, DefaultCurrency: "EUR"})
	if err != nil {
		b.Fatal(err)
	}
	return tenant
}

// load bulk-upserts n products in calls of 1,000 and checks every one was as want says.
func load(b *testing.B, svc *catalog.Service, tenant int64, n, rev int, want string) {
	ctx := context.Background()
	for lo := 0; lo < n; lo += catalog.MaxBulk {
		batch := make([]map[string]any, 0, catalog.MaxBulk)
		for i := lo; i < min(lo+catalog.MaxBulk, n); i++ {
			batch = append(batch, product(i, rev))
		}
		sum, err := svc.Bulk(ctx, tenant, batch)
		if err != nil {
			b.Fatal(err)
		}
		got := map[string]int{"created": sum.Created, "updated": sum.Updated, "unchanged": sum.Unchanged, "failed": sum.Failed}
		if got[want] != len(batch) {
			b.Fatalf("bulk: %+v, want every product %s (first result %+v)", got, want, sum.Results[0])
		}
	}
}

func percentiles(d []time.Duration) (p50, p95 float64) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return ms(d[len(d)/2]), ms(d[len(d)*95/100])
}

// BenchmarkCatalog loads the catalogue once, then measures each operation.
func BenchmarkCatalog(b *testing.B) {
	n := products()
	svc, tenant, db := setup(b)
	ctx := context.Background()
	// bulk-create loads the catalogue the other operations read: its first run into the tenant
	// above, any further one (-benchtime, -count) into a tenant of its own. products/s is the
	// products loaded over the time b.Loop measured, which is the loads alone.
	loaded := false
	b.Run("bulk-create", func(b *testing.B) {
		loads := 0
		for b.Loop() {
			into := tenant
			if loaded {
				b.StopTimer()
				into = newTenant(b, db, svc)
				b.StartTimer()
			}
			load(b, svc, into, n, 0, catalog.BulkCreated)
			loaded = true
			loads++
		}
		b.ReportMetric(float64(loads*n)/b.Elapsed().Seconds(), "products/s")
	})
	if !loaded { // bulk-create filtered out (-bench): the reads still need the catalogue
		load(b, svc, tenant, n, 0, catalog.BulkCreated)
	}
	rev := 0 // every run (-count) changes every price again
	b.Run("bulk-update", func(b *testing.B) {
		m, loads := min(n, 20_000), 0
		for b.Loop() {
			rev++
			load(b, svc, tenant, m, rev, catalog.BulkUpdated)
			loads++
		}
		b.ReportMetric(float64(loads*m)/b.Elapsed().Seconds(), "products/s")
	})
	queries := []catalog.ListQuery{
		{Q: "linen", Filters: map[string]string{"color": "red"}, PageSize: 50},
		{Q: "shirt dress", Filters: map[string]string{"brand": "Acme"}, PageSize: 50},
		{Q: "cotton", Filters: map[string]string{"tags": "summer", "active": "true"}, PageSize: 50, Page: 3},
		{Q: "jacket", Filters: map[string]string{"price": "42"}, PageSize: 50},
	}
	// list measures 400 calls. Counts are cached per query and catalogue version (one process's
	// cache): uncached lists from a service with an empty cache at every call, so every call
	// counts, as the first list of a query after a write does.
	list := func(uncached bool) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				lat := make([]time.Duration, 0, 400)
				for i := range 400 {
					s := svc
					if uncached {
						s = catalog.NewService(db.Pool, time.Now)
					}
					t0 := time.Now()
					if _, err := s.List(ctx, tenant, queries[i%len(queries)]); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				p50, p95 := percentiles(lat)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(p95, "p95-ms")
			}
		}
	}
	// Right after the bulk writes: no planner statistics yet, and the GIN indexes' pending lists
	// full of the new entries.
	b.Run("list-filter-q-after-load-uncached", list(true))
	// The steady state: what autovacuum does within a minute of such a load (the Postgres this
	// runs on may have it off, as the development machine's does).
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE products"); err != nil {
		b.Fatal(err)
	}
	b.Run("list-filter-q-uncached", list(true))
	b.Run("list-filter-q", list(false))
	b.Run("facets", func(b *testing.B) {
		for b.Loop() {
			lat := make([]time.Duration, 0, 200)
			for range 200 {
				t0 := time.Now()
				f, err := svc.Facets(ctx, tenant)
				if err != nil {
					b.Fatal(err)
				}
				if len(f["color"]) != len(colors) {
					b.Fatalf("color facet %v", f["color"])
				}
				lat = append(lat, time.Since(t0))
			}
			p50, p95 := percentiles(lat)
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p95, "p95-ms")
		}
	})
}
