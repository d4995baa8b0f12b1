package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

// latencies reports p50 and p99 of the samples, in milliseconds.
func latencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		i := min(len(lat)-1, int(p*float64(len(lat))))
		return float64(lat[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkTopK: top-20 over n random unit vectors of the local provider's 384 dimensions,
// through the index (Embedded.TopK: the quantised prefilter on every core, then the exact
// float32 scores of the candidates) and through the plain scan (every vector scored in float32,
// one goroutine, no SIMD) of the same vectors, in the same run. Before timing, both answer the
// same queries and must return the same matches. Reports p50 and p99 per query and the heap the
// vectors take per 100k (MB/100k, measured around the build). n=1M needs about 2 GB: set
// COHORT_BENCH_TOPK_1M=1.
func BenchmarkTopK(b *testing.B) {
	const dims, k = 384, 20
	sizes := []int{100_000}
	if os.Getenv("COHORT_BENCH_TOPK_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		ix, v, heap := benchIndex(b, n, dims)
		rng := rand.New(rand.NewPCG(uint64(n), 99))
		queries := make([][]float32, 64)
		for i := range queries {
			queries[i] = randomUnit(rng, dims)
		}
		ctx := context.Background()
		for _, q := range queries[:4] {
			got, err := ix.TopK(ctx, 1, model, q, k, nil)
			if err != nil {
				b.Fatal(err)
			}
			pq, _ := v.prepare(q)
			if want := v.scanExact(&pq, k, nil); !slices.Equal(got, want) {
				b.Fatalf("n=%d: the index returned %v, the plain scan %v", n, got, want)
			}
		}
		mbPer100k := float64(heap) / float64(n) * 100_000 / 1e6
		b.Run(fmt.Sprintf("n=%d/index", n), func(b *testing.B) {
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				if _, err := ix.TopK(ctx, 1, model, queries[i%len(queries)], k, nil); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				i++
			}
			latencies(b, lat)
			b.ReportMetric(mbPer100k, "MB/100k")
		})
		b.Run(fmt.Sprintf("n=%d/plain", n), func(b *testing.B) {
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				q, _ := v.prepare(queries[i%len(queries)])
				v.scanExact(&q, k, nil)
				lat = append(lat, time.Since(start))
				i++
			}
			latencies(b, lat)
		})
		runtime.KeepAlive(ix)
	}
}

// benchIndex builds an index holding n random unit vectors for tenant 1 (no database: the set is
// filled with the same upsert the loader uses) and returns it, the vectors and the heap they
// took.
func benchIndex(b *testing.B, n, dims int) (*Embedded, *vectors, uint64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	vec := make([]float32, dims)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := newVectors(dims, n)
	for i := range n {
		for j := range vec {
			vec[j] = float32(rng.NormFloat64())
		}
		normalize(vec)
		v.upsert(int64(i+1), vec)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	ix := NewEmbedded(nil, nil, time.Now, IndexConfig{})
	s := &tenantSet{key: setKey{1, model, dims}, v: v}
	ix.sets[s.key] = s
	ix.live.Store(true) // nothing to follow: the set is complete
	return ix, v, after.HeapAlloc - before.HeapAlloc
}
