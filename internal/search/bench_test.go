package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
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
// vectors take per 100k (MB/100k, measured around the build; the float32 values are in the
// set's mapped file, not on the heap). n=1M needs about 2 GB: set COHORT_BENCH_TOPK_1M=1.
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

// BenchmarkTopK1536: top-20 over n random unit vectors of text-embedding-3-small's 1,536
// dimensions, in one process: through the index (int8 codes on the heap, the exact float32 scores
// of the candidates read from the set's mapped file) and through the plain scan (every vector
// scored in float32 from a heap copy, one goroutine), in the same run; both must first return
// the same matches. Reports p50 and p99 per query and the anonymous resident memory (RssAnon:
// heap, not the page cache of the file) each build added, in MB and in bytes per vector: the
// index's int8 set, and the plain scan's float32 copy (the index held both before).
//
// n is COHORT_BENCH_1536_N (comma-separated; default 100000); COHORT_BENCH_1536_PLAIN=0 skips
// the plain scan and its heap copy (4 bytes a dimension a vector: 6 GB at 1M).
func BenchmarkTopK1536(b *testing.B) {
	const dims, k = 1536, 20
	sizes := benchSizes1536(b)
	withPlain := os.Getenv("COHORT_BENCH_1536_PLAIN") != "0"
	for _, n := range sizes {
		debug.FreeOSMemory()
		anon0 := rssAnon(b)
		ix, v, _ := benchIndex(b, n, dims)
		debug.FreeOSMemory()
		anon1 := rssAnon(b)
		var plain vectors
		var anon2 int64
		if withPlain {
			plain = *v
			plain.f32 = slices.Clone(v.f32) // on the heap, as the index held it before
			debug.FreeOSMemory()
			anon2 = rssAnon(b)
		}
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
			b.ReportMetric(float64(anon1-anon0)/1e6, "anon-MB")
			b.ReportMetric(float64(anon1-anon0)/float64(n), "anon-B/vector")
		})
		if withPlain {
			b.Run(fmt.Sprintf("n=%d/plain", n), func(b *testing.B) {
				var lat []time.Duration
				i := 0
				for b.Loop() {
					start := time.Now()
					q, _ := plain.prepare(queries[i%len(queries)])
					plain.scanExact(&q, k, nil)
					lat = append(lat, time.Since(start))
					i++
				}
				latencies(b, lat)
				b.ReportMetric(float64(anon2-anon1)/1e6, "anon-MB")
				b.ReportMetric(float64(anon2-anon1)/float64(n), "anon-B/vector")
			})
		}
		runtime.KeepAlive(ix)
		runtime.KeepAlive(plain.f32)
		v.close()
	}
}

// benchSizes1536 is COHORT_BENCH_1536_N: the comma-separated numbers of vectors of the 1,536-
// dimension benchmarks (default 100000).
func benchSizes1536(b *testing.B) []int {
	env := os.Getenv("COHORT_BENCH_1536_N")
	if env == "" {
		return []int{100_000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("COHORT_BENCH_1536_N: %q", env)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// rssAnon is the process's anonymous resident memory in bytes (RssAnon of /proc/self/status).
func rssAnon(b *testing.B) int64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// BenchmarkColdLoad1536: the first search of a tenant of n vectors of 1,536 dimensions stored
// in Postgres (COHORT_BENCH_LOAD_N, default 20000), on a fresh index each iteration: how long
// the HTTP endpoint's search takes to answer (503 search_index_loading) and how long the full
// load takes (also per million vectors, linearly). Run with -benchtime=1x; seeding is not timed.
func BenchmarkColdLoad1536(b *testing.B) {
	const dims = 1536
	n := 20_000
	if env := os.Getenv("COHORT_BENCH_LOAD_N"); env != "" {
		var err error
		if n, err = strconv.Atoi(env); err != nil || n <= 0 {
			b.Fatalf("COHORT_BENCH_LOAD_N: %q", env)
		}
	}
	f := newFixture(b)
	tenant := f.tenant("load")
	f.seedVectors(tenant, n, dims, 1)
	q := randomUnit(rand.New(rand.NewPCG(3, 3)), dims)
	var first, load time.Duration
	for b.Loop() {
		ix := NewEmbedded(f.db.Pool, nil, time.Now, IndexConfig{})
		start := time.Now()
		_, err := ix.TopK(failFast(f.ctx), tenant, model, q, 20, nil)
		first += time.Since(start)
		if err == nil {
			b.Log("the load finished within LoadWait: no 503")
		}
		if _, err := ix.TopK(f.ctx, tenant, model, q, 20, nil); err != nil {
			b.Fatal(err)
		}
		load += time.Since(start)
		for _, s := range ix.loaded() {
			s.drop()
		}
	}
	iters := float64(b.N)
	b.ReportMetric(first.Seconds()*1000/iters, "first-answer-ms")
	b.ReportMetric(load.Seconds()/iters, "load-s")
	b.ReportMetric(load.Seconds()/iters*1e6/float64(n), "load-s/1M")
}
