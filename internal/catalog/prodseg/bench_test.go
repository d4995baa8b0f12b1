package prodseg_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// Benchmarks at 100k products (COHORT_BENCH_PRODUCTS resizes), loaded with catalog Bulk, plus a
// second tenant of 20k products sharing the table:
//
//	go test -run '^$' -bench BenchmarkProdseg -benchtime 1x -timeout 30m ./internal/catalog/prodseg

func benchProducts() int {
	if v, err := strconv.Atoi(os.Getenv("COHORT_BENCH_PRODUCTS")); err == nil && v > 0 {
		return v
	}
	return 100_000
}

var (
	benchColors = []string{"red", "blue", "green", "black", "white", "navy", "beige", "olive", "grey", "pink"}
	benchBrands = []string{"Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne"}
	benchWords  = []string{"linen", "cotton", "wool", "shirt", "dress", "jacket", "summer", "classic", "slim", "relaxed"}
)

func benchProduct(i, rev int) map[string]any {
	return map[string]any{
		"sku":      fmt.Sprintf("SKU-%07d", i),
		"name":     fmt.Sprintf("%s %s %s %d", benchWords[i%10], benchWords[(i/10)%10], benchWords[(i/100)%10], i),
		"color":    benchColors[(i+rev)%len(benchColors)],
		"brand":    benchBrands[(i/3)%len(benchBrands)],
		"tags":     []any{benchWords[i%7], benchWords[(i+3)%10]},
		"price":    float64(10 + i%90),
		"stock":    float64(i % 500),
		"active":   (i+rev)%4 != 0,
		"released": time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i%1500).Format(time.DateOnly),
	}
}

func benchLoad(b *testing.B, f *fixture, tenant int64, from, to, rev int) {
	for lo := from; lo < to; lo += catalog.MaxBulk {
		batch := make([]map[string]any, 0, catalog.MaxBulk)
		for i := lo; i < min(lo+catalog.MaxBulk, to); i++ {
			batch = append(batch, benchProduct(i, rev))
		}
		sum, err := f.cat.Bulk(f.ctx, tenant, batch)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Failed > 0 {
			b.Fatalf("bulk: %d failed: %+v", sum.Failed, sum.Results[0])
		}
	}
}

func benchPercentiles(d []time.Duration) (p50, p95 float64) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return ms(d[len(d)/2]), ms(d[len(d)*95/100])
}

func BenchmarkProdseg(b *testing.B) {
	n := benchProducts()
	f := newFixture(b)
	tenant, other := f.tenant("bench"), f.tenant("bench-other")
	fields := []catalog.Field{
		{Name: "color", Type: catalog.TypeString},
		{Name: "brand", Type: catalog.TypeString},
		{Name: "tags", Type: catalog.TypeArray},
		{Name: "price", Type: catalog.TypePrice},
		{Name: "stock", Type: catalog.TypeInteger},
		{Name: "active", Type: catalog.TypeBoolean},
		{Name: "released", Type: catalog.TypeDate},
	}
	f.putSchema(tenant, fields...)
	f.putSchema(other, fields...)
	t0 := time.Now()
	benchLoad(b, f, tenant, 0, n, 0)
	benchLoad(b, f, other, 0, min(n, 20_000), 0)
	if _, err := f.db.Pool.Exec(context.Background(), "VACUUM ANALYZE products"); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d + %d products in %s", n, min(n, 20_000), time.Since(t0).Round(time.Second))

	skus := `"SKU-0000001","SKU-0000100","SKU-0005000","SKU-0012345","SKU-0099999","sku-0050000"`
	previews := []struct{ name, def string }{
		{"string-eq", `{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`},
		{"string-in", `{"conditions":[{"field":"color","operator":"in","value":["red","navy","olive"]}]}`},
		{"array-has", `{"conditions":[{"field":"tags","operator":"contains","value":"summer"}]}`},
		{"selective-and", `{"conditions":[{"field":"color","operator":"eq","value":"red"},{"field":"brand","operator":"eq","value":"Acme"},{"field":"active","operator":"eq","value":true}]}`},
		{"name-contains", `{"conditions":[{"field":"name","operator":"contains","value":"linen shirt"}]}`},
		{"name-contains-rare", `{"conditions":[{"field":"name","operator":"contains","value":"wool 4242"}]}`},
		{"sku-in", `{"conditions":[{"field":"sku","operator":"in","value":[` + skus + `]}]}`},
		{"price-range", `{"conditions":[{"field":"price","operator":"lt","value":20}]}`},
		{"date-range", `{"conditions":[{"field":"released","operator":"gte","value":"2023-06-01"}]}`},
		{"mixed-or", `{"logic":"OR","conditions":[{"field":"brand","operator":"eq","value":"Stark"},{"conditions":[{"field":"tags","operator":"eq","value":"wool"},{"field":"price","operator":"gte","value":95}]}]}`},
	}
	for _, p := range previews {
		b.Run("preview/"+p.name, func(b *testing.B) {
			for b.Loop() {
				lat := make([]time.Duration, 0, 50)
				var matched int64
				for range 50 {
					t0 := time.Now()
					pv, err := f.svc.Preview(f.ctx, tenant, []byte(p.def))
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					matched = pv.MatchedCount
				}
				p50, p95 := benchPercentiles(lat)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(p95, "p95-ms")
				b.ReportMetric(float64(matched), "matched")
			}
		})
	}

	computes := []struct{ name, def string }{
		{"broad", `{"conditions":[{"field":"active","operator":"eq","value":true}]}`},
		{"indexed", `{"conditions":[{"field":"color","operator":"in","value":["red","navy"]}]}`},
	}
	rev := 0 // every changed compute loads the first 10% of the products with new colors and active
	for _, c := range computes {
		seg := f.create(tenant, "bench "+c.name+" "+strconv.FormatInt(time.Now().UnixNano(), 36), c.def)
		b.Run("compute/"+c.name, func(b *testing.B) {
			for b.Loop() {
				// first: every member inserted; same: nothing changes; changed: 10% of the
				// products change color and active first.
				if _, err := f.db.Pool.Exec(f.ctx, "DELETE FROM product_segment_members WHERE segment_id = $1", seg.ID); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				first, err := f.svc.Compute(f.ctx, tenant, seg.ID)
				if err != nil {
					b.Fatal(err)
				}
				firstMS := float64(time.Since(t0).Microseconds()) / 1000
				t0 = time.Now()
				same, err := f.svc.Compute(f.ctx, tenant, seg.ID)
				if err != nil {
					b.Fatal(err)
				}
				sameMS := float64(time.Since(t0).Microseconds()) / 1000
				if same.Added != 0 || same.Removed != 0 {
					b.Fatalf("unchanged recompute %+v", same)
				}
				rev++
				benchLoad(b, f, tenant, 0, n/10, rev)
				t0 = time.Now()
				changed, err := f.svc.Compute(f.ctx, tenant, seg.ID)
				if err != nil {
					b.Fatal(err)
				}
				changedMS := float64(time.Since(t0).Microseconds()) / 1000
				b.ReportMetric(float64(first.Matched), "matched")
				b.ReportMetric(firstMS, "first-ms")
				b.ReportMetric(sameMS, "unchanged-ms")
				b.ReportMetric(changedMS, "changed-ms")
				b.ReportMetric(float64(changed.Added+changed.Removed), "diff-rows")
			}
		})
	}

	seg := f.create(tenant, "bench members", computes[0].def)
	if _, err := f.svc.Compute(f.ctx, tenant, seg.ID); err != nil {
		b.Fatal(err)
	}
	b.Run("members", func(b *testing.B) {
		for b.Loop() {
			lat := make([]time.Duration, 0, 100)
			for i := range 100 {
				t0 := time.Now()
				if _, err := f.svc.Members(f.ctx, tenant, seg.ID, int64(i*731%(n/2)), 50); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			p50, p95 := benchPercentiles(lat)
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p95, "p95-ms")
		}
	})
}
