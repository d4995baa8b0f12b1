package search

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkKernels: one pass of each kernel over 100k vectors of 384 dimensions, one goroutine.
func BenchmarkKernels(b *testing.B) {
	const n, dims = 100_000, 384
	rng := rand.New(rand.NewPCG(3, 4))
	f := make([]float32, n*dims)
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	i8 := make([]int8, n*dims)
	for i := range i8 {
		i8[i] = int8(rng.IntN(255) - 127)
	}
	q := f[:dims]
	q16 := make([]int16, dims)
	out := make([]int32, 256)
	for _, k := range []struct {
		name string
		f32  func(q, v []float32) float32
		i8   func([]int16, []int8, int, []int32)
	}{{"asm", dotF32Asm, dotsI8Asm}, {"go", dotF32Go, dotsI8Go}} {
		b.Run("f32/"+k.name, func(b *testing.B) {
			var s float32
			for b.Loop() {
				for i := range n {
					s += k.f32(q, f[i*dims:(i+1)*dims])
				}
			}
			b.ReportMetric(float64(n*dims*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		b.Run("i8/"+k.name, func(b *testing.B) {
			for b.Loop() {
				for i := 0; i < n; i += len(out) {
					c := min(len(out), n-i)
					k.i8(q16, i8[i*dims:], dims, out[:c])
				}
			}
			b.ReportMetric(float64(n*dims)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkCodeStream: the int8 kernel alone over the resident codes of n vectors of 1,536
// dimensions (COHORT_BENCH_1536_N's first size, default 100000), split between GOMAXPROCS
// goroutines as the prefilter splits its scan, once per iteration: what reading the codes costs
// on this machine, without bounds, candidates or rescoring. BenchmarkTopK1536's index figures
// compare with it (ms per pass and GB/s, both the median of the iterations).
func BenchmarkCodeStream(b *testing.B) {
	const dims = 1536
	n := benchSizes1536(b)[0]
	stride := roundUp(dims, i8Block)
	codes := make([]int8, n*stride)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range codes {
		codes[i] = int8(rng.IntN(255) - 127)
	}
	q := make([]int16, stride)
	for i := range q {
		q[i] = int16(rng.IntN(2001) - 1000)
	}
	workers := runtime.GOMAXPROCS(0)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		chunks(workers, n, scanChunk, func(_, lo, hi int) {
			var out [128]int32
			for s := lo; s < hi; s += len(out) {
				m := min(len(out), hi-s)
				dotsI8(q, codes[s*stride:(s+m)*stride], stride, out[:m])
			}
		})
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	med := lat[len(lat)/2]
	b.ReportMetric(float64(med.Microseconds())/1e3, "ms/pass")
	b.ReportMetric(float64(len(codes))/med.Seconds()/1e9, "GB/s")
}
