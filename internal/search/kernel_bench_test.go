package search

import (
	"math/rand/v2"
	"testing"
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
